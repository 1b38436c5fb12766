#!/bin/bash
# One message past 1 GiB (1 GiB + 64 KiB: past the old ceiling, and past
# the default --log-mem, so the CM must take a payload larger than its log
# memory bound and spill it), bytes checked by the receiver and hashed:
# over the cm transport with default options, over direct, and through
# the CM with the receiver killed after it, so its restart gets the
# message back from the spilled log. A send past 4 GiB - 1 bytes fails
# with MPI_ERR_COUNT naming the limit (checked inside the program).
# Skipped when the machine lacks the memory (about 4 GiB: two 1 GiB
# buffers and the CM's copy) or the spill space.
here=$(dirname "$0")
ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-150s}
. "$here/lib.sh"

BYTES=$((1024 * 1024 * 1024 + 65536))
NEED_MEM_KIB=$((5 * 1024 * 1024))
NEED_DISK_KIB=$((2 * 1024 * 1024))
avail=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "${avail:-0}" -lt "$NEED_MEM_KIB" ]; then
	echo "SKIP: bigmsg needs $((NEED_MEM_KIB / 1024)) MiB of available memory, the machine has $((${avail:-0} / 1024)) MiB"
	exit 77
fi
itest_setup
spill=$itest_work/spill
mkdir -p "$spill"
disk=$(df -Pk "$spill" | awk 'NR == 2 {print $4}')
if [ "${disk:-0}" -lt "$NEED_DISK_KIB" ]; then
	echo "SKIP: bigmsg needs $((NEED_DISK_KIB / 1024)) MiB free in $spill, there are $((${disk:-0} / 1024)) MiB"
	exit 77
fi
want="bigmsg: $BYTES bytes, hash 641b9a2f60fc0836"

# big_job NAME KILL [cmrun options]: exit 0, the expected line, nothing
# else on stdout, no leftovers; KILL=1: rank 1 was restarted and the CM
# replayed the message after spilling it.
big_job() {
	local name=$1 kill=$2 clean=0
	shift 2
	itest_selected "$name" || return 0
	BM_KILL=$kill itest_run "$name" 2 "$@" -- bigmsg "$BYTES" || clean=1
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif [ "$(cat "$itest_work/$name.out")" != "$want" ]; then
		itest_fail "$name" "stdout is not \"$want\": $(head -c 300 "$itest_work/$name.out")"
	elif [ "$kill" = 1 ] && ! grep -q 'rank 1 .*restarting it as incarnation 1' \
		"$itest_work/$name.err"; then
		itest_fail "$name" "rank 1 was not killed and restarted"
	elif [ "$kill" = 1 ] && ! grep -Eq "replayed, $BYTES bytes spilled" "$itest_work/$name.err"; then
		itest_fail "$name" "the CM did not spill the message and replay it"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

big_job bigmsg_cm 0 --transport cm
big_job bigmsg_direct 0 --transport direct
big_job bigmsg_kill_spilled 1 --transport cm -vv --spill-dir "$spill"

itest_finish
