#!/bin/sh
# Stands in for cmserver (CHANMEM_CMSERVER points here) in the --cm-restart
# tests: appends its command line to $CM_ARGS_FILE (one CM start per line),
# creates the --journal file it is given (so the test sees the journal
# directory emptied and removed), and becomes the real cmserver ($CMSERVER),
# without --journal when that cmserver does not take it. With
# JOURNAL_CMSERVER_FAIL=N the Nth start exits 1 at once instead; with
# JOURNAL_CMSERVER_MOVE=N the Nth start listens on a new port and unix name
# (its --listen port and --unix are dropped).
printf '%s\n' "$*" >>"$CM_ARGS_FILE"
start=$(wc -l <"$CM_ARGS_FILE")
if [ "$start" = "${JOURNAL_CMSERVER_FAIL:-0}" ]; then
	echo "journal_cmserver.sh: start $start fails on purpose" >&2
	exit 1
fi
takes=no
"$CMSERVER" --help 2>/dev/null | grep -q -- '--journal' && takes=yes
n=$#
i=0
while [ "$i" -lt "$n" ]; do
	a=$1
	shift
	i=$((i + 1))
	if [ "$a" = --journal ]; then
		j=$1
		shift
		i=$((i + 1))
		: >>"$j" || exit 1
		[ "$takes" = yes ] && set -- "$@" --journal "$j"
		continue
	fi
	if [ "$start" = "${JOURNAL_CMSERVER_MOVE:-0}" ]; then
		case $a in
		--unix) shift; i=$((i + 1)); continue ;;
		--listen) set -- "$@" --listen "${1%:*}:0"; shift; i=$((i + 1)); continue ;;
		esac
	fi
	set -- "$@" "$a"
done
exec "$CMSERVER" "$@"
