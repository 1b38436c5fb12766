#!/bin/bash
# MPI_Cancel of receives (programs/cancel_recv): unmatched receives are
# cancelled, matched ones complete with their data, a cancelled receive takes
# no message, and a cancel racing its message gets one answer that a
# re-executed rank (or every replica) gets again. Direct, cm with 1 and 2
# channel memories, repl, cm with the cancelling rank killed once, twice, or
# at its first round, and repl with its master or its other replica killed:
# stdout is the failure-free output exactly.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup

NP=3
ROUNDS=12

itest_expect_success cancel_direct cancel_recv "$NP" --transport direct -- \
	cancel_recv "$ROUNDS"
itest_expect_success cancel_cm cancel_recv "$NP" -- cancel_recv "$ROUNDS"
itest_expect_success cancel_cms2 cancel_recv "$NP" --cms 2 -- cancel_recv "$ROUNDS"
# (No channel memory under --replicate: CHANMEM_TEST_MODE, which would add
# a CM --mode, does not apply.)
CHANMEM_TEST_MODE='' itest_expect_success cancel_repl cancel_recv "$NP" --replicate 2 -- \
	cancel_recv "$ROUNDS"

# cancel_kill NAME KILL_AT [cmrun options]: rank 0 kills itself after round
# KILL_AT's cancels (CANCEL_KILL_TIMES from the caller); the job must end 0
# with the failure-free stdout, after restarting rank 0.
cancel_kill() {
	local name=$1 at=$2
	shift 2
	itest_selected "$name" || return 0
	local clean=0 exp="$ITEST_EXPECTED_DIR/cancel_recv.expected"
	CANCEL_KILL_AT=$at itest_run "$name" "$NP" -v "$@" -- cancel_recv "$ROUNDS" || clean=1
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! diff -u "$exp" "$itest_work/$name.out" >"$itest_work/$name.diff"; then
		itest_fail "$name" "stdout differs from the failure-free run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif ! grep -q "rank 0 .*restarting it as incarnation ${CANCEL_KILL_TIMES:-1} " \
		"$itest_work/$name.err"; then
		itest_fail "$name" "rank 0 was not killed and restarted ${CANCEL_KILL_TIMES:-1} times"
	elif grep -q "FAIL\|diverged\|refused" "$itest_work/$name.err"; then
		itest_fail "$name" "errors on stderr"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

cancel_kill cancel_kill_mid 5
cancel_kill cancel_kill_first 0
cancel_kill cancel_kill_cms2 7 --cms 2
CANCEL_KILL_TIMES=2 cancel_kill cancel_kill_twice 4

# repl_kill NAME REPLICA: replica REPLICA of rank 0 (0: the master, whose
# cancel decisions the other replica follows) kills itself after round 5;
# the other carries on: exit 0, the failure-free stdout. (Its peers may
# report the reset connection on stderr.)
repl_kill() {
	local name=$1 replica=$2
	itest_selected "$name" || return 0
	local clean=0 exp="$ITEST_EXPECTED_DIR/cancel_recv.expected"
	CHANMEM_TEST_MODE='' CANCEL_KILL_AT=5 CANCEL_KILL_REPLICA=$replica \
		itest_run "$name" "$NP" --replicate 2 -- \
		cancel_recv "$ROUNDS" || clean=1
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! diff -u "$exp" "$itest_work/$name.out" >"$itest_work/$name.diff"; then
		itest_fail "$name" "stdout differs from the failure-free run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif grep -q "FAIL\|diverged\|give back" "$itest_work/$name.err"; then
		itest_fail "$name" "errors on stderr"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

repl_kill cancel_repl_kill_master 0
repl_kill cancel_repl_kill_other 1

itest_finish
