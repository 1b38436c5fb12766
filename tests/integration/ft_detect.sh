#!/bin/bash
# Failure detection by cmrun (docs/fault-tolerance.md,
# "Detection"): failures where no process dies by itself. programs/ft_detect
# makes rank R fail at iteration I of its first incarnation:
#   cut   it shuts down its sockets to the channel memories and waits: the CM
#         reports the lost connection (--report-fd), cmrun kills and restarts it;
#   stop  it stops itself (SIGSTOP): its heartbeats stop, cmrun kills and
#         restarts it after --heartbeat-timeout.
# A host's ranks killed together (--kill-host) are all restarted. Each run must
# end with the failure-free run's output, exit 0, nothing left behind, and the
# status line (--status) must show the restarts and replayed messages.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup

NP=4
ITERS=24

det_sorted() {
	sort -s -k1,1 "$itest_work/$1.out"
}

# The last status line cmrun drew (--status on a non-terminal: \r-separated).
det_status() {
	tr '\r' '\n' <"$itest_work/$1.err" | sed 's/\x1b\[K//g' | grep '^cmrun: ranks running' |
		tail -n 1
}

# stderr without the status line draws.
det_stderr_rest() {
	tr '\r' '\n' <"$itest_work/$1.err" | sed 's/\x1b\[K//g' |
		grep -v -e '^cmrun: ranks running' -e '^$'
}

det_ref() {
	itest_run det_ref "$NP" --tag-output -- ft_detect "$ITERS"
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail det_ref "reference run exit status $itest_rc"
		itest_finish
		exit
	fi
	det_sorted det_ref >"$itest_work/det_ref.sorted"
	itest_pass det_ref
}

# det_same NAME RESTARTS [cmrun options] -- PROGRAM ARGS: exit 0, the reference
# output, only status lines on stderr, the final one with RESTARTS restarts and
# (unless DET_NO_REPLAY=1: the failure may come before any delivery) some
# messages replayed; nothing left behind.
det_same() {
	local name=$1 restarts=$2
	shift 2
	itest_selected "$name" || return 0
	local clean=0
	itest_run "$name" "$NP" --tag-output --status "$@" || clean=1
	local status replayed
	status=$(det_status "$name")
	replayed=$(sed -n 's/.*, replayed \([0-9]*\),.*/\1/p' <<<"$status")
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! diff -u "$itest_work/det_ref.sorted" <(det_sorted "$name") >"$itest_work/$name.diff"; then
		itest_fail "$name" "output differs from the failure-free run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif [ -n "$(det_stderr_rest "$name")" ]; then
		itest_fail "$name" "unexpected output on stderr"
	elif ! grep -q "^cmrun: ranks running 0/[0-9]*, restarts $restarts, " <<<"$status"; then
		itest_fail "$name" "final status line '$status', expected $restarts restarts"
	elif [ "$restarts" -gt 0 ] && [ "${DET_NO_REPLAY:-0}" != 1 ] && ! [ "${replayed:-0}" -gt 0 ]; then
		itest_fail "$name" "final status line '$status': nothing replayed after a restart"
	elif [ "$restarts" -gt 0 ] &&
		! grep -q "^cmrun: fault report: .*, $restarts restarts\{0,1\} over " "$itest_work/$name.report"; then
		itest_fail "$name" "no fault report with $restarts restarts: $(cat "$itest_work/$name.report")"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

det_ref

# Cut off from the CM: detected through the CM's report alone (heartbeats
# go on: the process and its heartbeat thread are alive).
FT_DETECT_HOW=cut FT_DETECT_RANK=1 FT_DETECT_AT=8 det_same det_cut_r1 1 -- \
	ft_detect "$ITERS"
FT_DETECT_HOW=cut FT_DETECT_RANK=0 FT_DETECT_AT=12 det_same det_cut_r0_cms2 1 --cms 2 -- \
	ft_detect "$ITERS"
FT_DETECT_HOW=cut FT_DETECT_RANK=3 FT_DETECT_AT=0 DET_NO_REPLAY=1 det_same det_cut_r3_first 1 \
	--heartbeat-timeout 0 -- ft_detect "$ITERS"

# A declared failure counts against --max-restarts like any other: the job
# stops with the status of the killed rank (128 + SIGKILL).
if itest_selected det_cut_no_restart; then
	clean=0
	FT_DETECT_HOW=cut FT_DETECT_RANK=2 FT_DETECT_AT=5 itest_run det_cut_no_restart "$NP" \
		--max-restarts 0 -- ft_detect "$ITERS" || clean=1
	if [ "$itest_rc" -ne 137 ]; then
		itest_fail det_cut_no_restart "exit status $itest_rc, expected 137"
	elif ! grep -q "rank 2 killed by signal SIGKILL (declared failed: its connection to cmserver 0 ended without MPI_Finalize); not restarted: it reached --max-restarts 0" \
		"$itest_work/det_cut_no_restart.err"; then
		itest_fail det_cut_no_restart "stderr does not say why rank 2 was not restarted"
	elif [ "$clean" -ne 0 ]; then
		itest_fail det_cut_no_restart "processes left behind"
	else
		itest_pass det_cut_no_restart
	fi
fi

# Stopped: only the heartbeats tell.
FT_DETECT_HOW=stop FT_DETECT_RANK=2 FT_DETECT_AT=10 det_same det_stop_r2 1 \
	--heartbeat-timeout 1s -- ft_detect "$ITERS"
FT_DETECT_HOW=stop FT_DETECT_RANK=0 FT_DETECT_AT=3 det_same det_stop_r0_cms2 1 --cms 2 \
	--heartbeat-timeout 500ms -- ft_detect "$ITERS"

# Without heartbeats nothing notices a stopped rank: the job runs into its
# timeout (124), and the teardown still leaves nothing behind.
if itest_selected det_stop_undetected; then
	clean=0
	FT_DETECT_HOW=stop FT_DETECT_RANK=1 FT_DETECT_AT=4 ITEST_JOB_TIMEOUT=2s \
		itest_run det_stop_undetected "$NP" --heartbeat-timeout 0 -- ft_detect "$ITERS" ||
		clean=1
	if [ "$itest_rc" -ne 124 ]; then
		itest_fail det_stop_undetected "exit status $itest_rc, expected 124 (timeout)"
	elif [ "$clean" -ne 0 ]; then
		itest_fail det_stop_undetected "processes left behind"
	else
		itest_pass det_stop_undetected
	fi
fi

# Stopped from outside: the test sends SIGSTOP to the pid cmrun -v reports.
if itest_selected det_sigstop_pid; then
	(
		FT_SLEEP_MS=30 itest_run det_sigstop_pid "$NP" -v --tag-output \
			--heartbeat-timeout 1s -- ft_detect "$ITERS"
		echo "$? $itest_rc" >"$itest_work/det_sigstop_pid.rc"
	) &
	job=$!
	pid=
	for i in $(seq 1 100); do
		pid=$(sed -n 's/^cmrun: rank 1 started (pid \([0-9]*\), incarnation 0,.*/\1/p' \
			"$itest_work/det_sigstop_pid.err" 2>/dev/null)
		[ -n "$pid" ] && break
		sleep 0.1
	done
	if [ -n "$pid" ]; then
		sleep 0.3
		kill -STOP "$pid" 2>/dev/null
	fi
	wait "$job"
	read -r leftovers rc <"$itest_work/det_sigstop_pid.rc"
	itest_rc=$rc
	if [ -z "$pid" ]; then
		itest_fail det_sigstop_pid "cmrun -v did not report rank 1's pid"
	elif [ "$rc" -ne 0 ]; then
		itest_fail det_sigstop_pid "exit status $rc, expected 0"
	elif ! diff -u "$itest_work/det_ref.sorted" <(det_sorted det_sigstop_pid) \
		>"$itest_work/det_sigstop_pid.diff"; then
		itest_fail det_sigstop_pid "output differs from the failure-free run:"
		head -n 20 "$itest_work/det_sigstop_pid.diff" | sed 's/^/    /'
	elif ! grep -q "rank 1 (pid $pid, incarnation 0) declared failed: no heartbeat for 1s" \
		"$itest_work/det_sigstop_pid.err"; then
		itest_fail det_sigstop_pid "no heartbeat detection of the stopped rank reported"
	elif [ "$leftovers" -ne 0 ]; then
		itest_fail det_sigstop_pid "processes left behind"
	else
		itest_pass det_sigstop_pid
	fi
fi

# Replicas are processes too: a stopped replica is killed, the rank goes on
# in its other replica (replicas are not restarted).
if itest_selected det_stop_replica; then
	clean=0
	FT_DETECT_HOW=stop FT_DETECT_RANK=1 FT_DETECT_REPLICA=1 FT_DETECT_AT=6 \
		itest_run det_stop_replica "$NP" -v --replicate 2 --tag-output \
		--heartbeat-timeout 1s -- ft_detect "$ITERS" || clean=1
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail det_stop_replica "exit status $itest_rc, expected 0"
	elif ! diff -u "$itest_work/det_ref.sorted" <(det_sorted det_stop_replica) \
		>"$itest_work/det_stop_replica.diff"; then
		itest_fail det_stop_replica "output differs from the failure-free run:"
		head -n 20 "$itest_work/det_stop_replica.diff" | sed 's/^/    /'
	elif ! grep -q "rank 1 replica 1 (pid [0-9]*) declared failed: no heartbeat" \
		"$itest_work/det_stop_replica.err"; then
		itest_fail det_stop_replica "the stopped replica was not declared failed"
	elif [ "$clean" -ne 0 ]; then
		itest_fail det_stop_replica "processes left behind"
	else
		itest_pass det_stop_replica
	fi
fi

# Node kill: host b (ranks 2 and 3) goes down mid-run; both are restarted.
# (What they received before the kill depends on timing: no replay check.)
FT_SLEEP_MS=20 DET_NO_REPLAY=1 det_same det_kill_host 2 --host a:2,b:2 --kill-host b@150ms -- \
	ft_detect "$ITERS"
printf 'a slots=1   # rank 0\nb slots=2\n\nc  # rank 3\n' >"$itest_work/hosts"
FT_SLEEP_MS=20 DET_NO_REPLAY=1 det_same det_kill_host_file 2 --hosts "$itest_work/hosts" \
	--kill-host b@150ms -- ft_detect "$ITERS"

itest_finish
