#!/bin/bash
# No process outlives cmrun: after success, a failing rank, SIGINT, SIGTERM,
# --timeout, a rank that ignores SIGTERM, a cmserver dying mid-run, and
# SIGKILL of cmrun itself (there the kernel's parent-death signal does it).
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
need_cmserver
RANK="$HELPERS/rank.sh"

# all_gone WHAT: every recorded rank, child of a rank and cmserver has ended.
all_gone() {
	touch "$T/pids" "$T/pids.cms"
	cat "$T/pids.cms" >>"$T/pids"
	wait_gone 10 "$T/pids" || fail "processes left behind after $1"
	rm -f "$T/pids" "$T/pids.cms"
}

# started N: waits until N lines of pids are recorded (the job is running).
started() {
	wait_lines 20 "$T/pids" "$1" || fail "ranks did not start: $(cat "$T/err")"
	[ -s "$T/pids.cms" ] || [ "$2" = direct ] || fail "cmservers not recorded"
}

note "success, with a rank leaving a child behind"
run_cmrun -n 3 sh "$RANK" "$T/pids" leave-child
expect_status 0 "success"
[ "$(wc -l <"$T/pids")" = 6 ] || fail "ranks did not record themselves"
all_gone "success"

note "success, with ranks leaving children and grandchildren that ignore SIGTERM"
run_cmrun -n 3 --transport direct sh "$RANK" "$T/pids" leave-tree
expect_status 0 "leave-tree"
[ "$(wc -l <"$T/pids")" = 6 ] || fail "ranks did not record their children"
all_gone "success, with leftovers ignoring SIGTERM"

note "a failing rank"
run_cmrun -n 4 --cms 2 sh "$RANK" "$T/pids" fail 2 9
expect_status 9 "failing rank"
expect_err "cmrun: rank 2 exited with status 9" "failing rank"
all_gone "a failing rank"

for sig in INT TERM; do
	note "SIG$sig to cmrun"
	start_cmrun -n 3 sh "$RANK" "$T/pids" family
	started 6
	kill -"$sig" "$CMRUN_PID"
	wait_cmrun
	if [ "$sig" = INT ]; then expect_status 130 "SIGINT"; else expect_status 143 "SIGTERM"; fi
	expect_err "cmrun: caught SIG$sig, stopping the job" "SIG$sig"
	all_gone "SIG$sig"
done

note "--timeout"
run_cmrun -n 3 --timeout 1s sh "$RANK" "$T/pids" family
expect_status 124 "timeout"
expect_err "cmrun: timeout after 1s" "timeout"
all_gone "--timeout"

note "a rank that ignores SIGTERM"
run_cmrun -n 2 --transport direct --timeout 500ms sh "$RANK" "$T/pids" ignore-term
expect_status 124 "ignore-term"
all_gone "a rank ignoring SIGTERM"

note "a cmserver dies during the run"
run_cmrun -n 3 sh "$RANK" "$T/pids" kill-cm
expect_status 1 "cmserver died"
expect_err "cmrun: cmserver 0" "cmserver died"
expect_err "killed by signal SIGKILL during the run; stopping the job" "cmserver died"
all_gone "a cmserver died"

note "SIGKILL to cmrun"
start_cmrun -n 3 --cms 2 sh "$RANK" "$T/pids" sleep
started 3
kill -KILL "$CMRUN_PID"
wait "$TIMEOUT_PID" 2>/dev/null
all_gone "SIGKILL of cmrun"

note "SIGKILL to cmrun, transport direct"
start_cmrun -n 3 --transport direct sh "$RANK" "$T/pids" sleep
started 3 direct
kill -KILL "$CMRUN_PID"
wait "$TIMEOUT_PID" 2>/dev/null
all_gone "SIGKILL of cmrun (direct)"
finish
