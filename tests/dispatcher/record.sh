#!/bin/sh
# record.sh FILE PID...: appends "PID STARTTIME" for each pid still running,
# so a test can later check that exactly these processes are gone.
file=$1
shift
for pid in "$@"; do
	sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk -v p="$pid" '{ print p, $20 }' >>"$file"
done
