#!/bin/sh
# record_cms.sh FILE CMRUN_PID: records (as record.sh does) cmrun's children
# that are cmservers (started with --ready-fd).
here=$(dirname "$0")
for pid in $(cat "/proc/$2/task/$2/children" 2>/dev/null); do
	case $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") in
	*--ready-fd*) sh "$here/record.sh" "$1" "$pid" ;;
	esac
done
