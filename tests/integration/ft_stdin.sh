#!/bin/bash
# Rank 0's stdin under kills (docs/fault-tolerance.md, "Standard input"):
# `seq 1 200 | cmrun -n 2 --kill-at 0:1s ft_stdin 10` -- rank 0 reads a
# number per line, sends each to rank 1, and is killed half-way through its
# input. The restarted rank 0 must read the same input again and both ranks
# must print the failure-free sums; the same with rank 0 restored from a
# checkpoint image (it resumes mid-input), and with two CMs.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=2
ITEST_JOB_TIMEOUT=40s
input="$itest_work/numbers"
seq 1 200 >"$input"
export ITEST_STDIN=$input

ft_ref stdin_ref -- ft_stdin
if grep -q 'sum 20100$' "$itest_work/stdin_ref.sorted"; then
	itest_pass stdin_ref.sum
else
	itest_fail stdin_ref.sum "the reference run did not add 1..200 up to 20100"
fi

# stdin_job NAME [cmrun options]: rank 0 restarted at least once, output as
# the reference.
stdin_job() {
	local name=$1
	shift
	itest_selected "$name" || return 0
	local before=$itest_failures
	FT_VERBOSE=1 ft_same "$name" stdin_ref -v "$@"
	[ "$itest_failures" -ne "$before" ] && return 0
	if grep -q 'rank 0 .*restarting it as incarnation' "$itest_work/$name.err"; then
		itest_pass "$name.restarted"
	else
		itest_fail "$name.restarted" "rank 0 was not restarted (the kill came too late?)"
	fi
}

stdin_job stdin_kill --kill-at 0:1s -- ft_stdin 10
stdin_job stdin_ckpt --kill-at 0:1s --ckpt-dir "$itest_work/ck" --ckpt-every 100ms -- \
	ft_stdin 10 1
stdin_job stdin_cms2 --cms 2 --mode specialized --kill-at 0:1s -- ft_stdin 10

itest_finish
