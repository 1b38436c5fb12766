#!/bin/sh
# A rank for the teardown tests. Records "PID STARTTIME" of itself (and of
# what it starts) in PIDFILE, so the test can check every one is gone.
#   rank.sh PIDFILE sleep          sleeps (exec: no other process)
#   rank.sh PIDFILE family         starts a sleeping child of its own, waits
#   rank.sh PIDFILE leave-child    starts a sleeping child and exits 0
#   rank.sh PIDFILE leave-tree     leaves a child and a grandchild in a session of
#                                  its own, both ignoring SIGTERM, and exits 0
#   rank.sh PIDFILE ignore-term    ignores SIGTERM and sleeps
#   rank.sh PIDFILE fail R S       rank R exits S once all ranks recorded; others: family
#   rank.sh PIDFILE kill-cm        rank 0 kills a cmserver once all ranks recorded; others: family
# Rank 0 also records cmrun's cmservers (its siblings started with --ready-fd).
here=$(dirname "$0")
pidfile=$1
mode=$2

if [ "$CHANMEM_RANK" = 0 ]; then
	sh "$here/record_cms.sh" "$pidfile.cms" "$PPID"
fi

family() {
	sleep 60 &
	sh "$here/record.sh" "$pidfile" $$ $!
	wait
}

# Waits (bounded) until every rank has recorded itself.
all_recorded() {
	i=0
	while [ "$i" -lt 100 ] && [ "$(cat "$pidfile" 2>/dev/null | wc -l)" -lt "$1" ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

case $mode in
sleep)
	sh "$here/record.sh" "$pidfile" $$
	exec sleep 60
	;;
family)
	family
	;;
leave-child)
	sleep 60 &
	sh "$here/record.sh" "$pidfile" $$ $!
	exit 0
	;;
leave-tree)
	# Child: ignores SIGTERM, starts the grandchild in a new session.
	# Grandchild: ignores SIGTERM, sleeps. No pipe ties them to cmrun.
	CHANMEM_RANK= sh "$0" "$pidfile" middle >/dev/null 2>&1 &
	all_recorded $((CHANMEM_SIZE * 2))
	exit 0
	;;
middle)
	trap '' TERM
	$(command -v setsid) sh "$0" "$pidfile" ignore-term &
	sh "$here/record.sh" "$pidfile" $$
	wait
	;;
ignore-term)
	trap '' TERM
	sh "$here/record.sh" "$pidfile" $$
	exec sleep 60
	;;
fail)
	if [ "$CHANMEM_RANK" = "$3" ]; then
		sh "$here/record.sh" "$pidfile" $$ $$
		all_recorded $((CHANMEM_SIZE * 2))
		exit "$4"
	fi
	family
	;;
kill-cm)
	if [ "$CHANMEM_RANK" = 0 ]; then
		sh "$here/record.sh" "$pidfile" $$ $$
		all_recorded $((CHANMEM_SIZE * 2))
		kill -KILL "$(head -1 "$pidfile.cms" | cut -d' ' -f1)"
		exec sleep 60
	fi
	family
	;;
*)
	echo "rank.sh: unknown mode '$mode'" >&2
	exit 2
	;;
esac
