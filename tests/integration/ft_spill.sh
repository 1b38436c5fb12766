#!/bin/bash
# The CM's log past --log-mem: delivered payloads go to the spill
# store (LMDB) and come back when a re-executed rank is replayed. The CMs run
# with a log budget far below what the job logs (--log-mem 1MiB against
# 8 MiB messages: every delivered payload is spilled), ranks are killed, and
# the output must be the failure-free run's. With --no-spill the same replay
# must fail, saying why: the spill store is what makes it work.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
wrapper() { # NAME OPTIONS...: a cmserver with these options, for CHANMEM_CMSERVER
	local w="$itest_work/cmserver-$1"
	shift
	printf '#!/bin/bash\nexec %q %s "$@"\n' "$CMSERVER" "$*" >"$w"
	chmod +x "$w"
	echo "$w"
}
SPILL=$(wrapper spill --log-mem 1MiB --spill-dir "$itest_work/spill")
SMALL=$(wrapper small --log-mem 64KiB)
NOSPILL=$(wrapper nospill --log-mem 1MiB --no-spill)

ft_ref spill_ref_big -- ft_suite big 5
ft_ref spill_ref_ring -- ft_suite ring 30

# 160 MiB through CMs holding 1 MiB: rank 1 killed mid-transfer, replayed
# from the spill store.
CHANMEM_CMSERVER=$SPILL FT_KILL_RANK=1 FT_KILL_AT=3 ft_same spill_big_kill spill_ref_big -- \
	ft_suite big 5
CHANMEM_CMSERVER=$SPILL FT_KILL_RANK=0,2 FT_KILL_AT=4 FT_KILL_TIMES=2 ft_same \
	spill_big_two_twice spill_ref_big --mode specialized -- ft_suite big 5
CHANMEM_CMSERVER=$SMALL FT_KILL_RANK=3 FT_KILL_AT=25 FT_REKILL_AT=9 ft_same \
	spill_ring_during_replay spill_ref_ring --cms 2 -- ft_suite ring 30

# The CM says it spilled (cmrun -v -v hands --verbose to cmserver), in every
# mode through its log-writer thread.
for mode in mono thread-per-client multiplexer specialized; do
name=spill_counted_$mode
if itest_selected $name; then
	CHANMEM_CMSERVER=$SPILL itest_run $name "$NP" -v -v --mode $mode -- ft_suite big 3
	spilled=$(sed -n 's/.*, \([0-9]*\) bytes spilled, .*/\1/p' "$itest_work/$name.err" |
		head -n 1)
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail $name "exit status $itest_rc"
	elif [ -z "$spilled" ] || [ "$spilled" -lt $((NP * 2 * 8 * 1048576)) ]; then
		itest_fail $name "spilled '${spilled:-nothing}' bytes, expected at least $((NP * 2 * 8)) MiB"
	else
		itest_pass "$name ($spilled bytes spilled)"
	fi
fi
done

# Without the store the replay cannot happen: a clear failure, not a hang.
name=spill_off_fails
if itest_selected $name; then
	clean=0
	CHANMEM_CMSERVER=$NOSPILL FT_KILL_RANK=1 FT_KILL_AT=3 itest_run $name "$NP" -- \
		ft_suite big 5 || clean=1
	if [ "$itest_rc" -eq 0 ]; then
		itest_fail $name "the job succeeded without the messages it needed"
	elif ! grep -q "raise --log-mem" "$itest_work/$name.err"; then
		itest_fail $name "stderr does not say the log was dropped past --log-mem"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

itest_finish
