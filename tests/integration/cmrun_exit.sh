#!/bin/bash
# Exit status: 0 when every rank exits 0, else the first non-zero rank status
# (128+signal for a signal death), with cmrun's message naming the rank.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"

for transport in direct cm; do
	if [ "$transport" = cm ]; then
		need_cmserver
	fi
	note "transport $transport: all ranks exit 0"
	run_cmrun -n 4 --transport "$transport" true
	expect_status 0 "all ranks true"
	[ ! -s "$T/err" ] || fail "unexpected stderr: $(cat "$T/err")"

	note "transport $transport: one rank exits 3"
	run_cmrun -n 4 --transport "$transport" sh -c '[ "$CHANMEM_RANK" = 2 ] && exit 3; exec sleep 30'
	expect_status 3 "rank 2 exits 3"
	expect_err "cmrun: rank 2 exited with status 3" "rank 2 exits 3"

	note "transport $transport: the first non-zero status wins"
	# Rank 1 fails at once; rank 3 would fail later with 7 but is stopped.
	run_cmrun -n 4 --transport "$transport" sh -c '
		case $CHANMEM_RANK in
		1) exit 5 ;;
		3) sleep 30; exit 7 ;;
		*) exec sleep 30 ;;
		esac'
	expect_status 5 "first failure"
	expect_err "cmrun: rank 1 exited with status 5" "first failure"
	if grep -q "rank 3 exited" "$T/err"; then
		fail "a rank stopped by cmrun was reported as failing"
	fi

	note "transport $transport: a rank killed by a signal"
	run_cmrun -n 3 --transport "$transport" sh -c '[ "$CHANMEM_RANK" = 0 ] && kill -SEGV $$; exec sleep 30'
	expect_status 139 "rank killed by SIGSEGV"
	expect_err "cmrun: rank 0 killed by signal SIGSEGV" "rank killed by SIGSEGV"
	run_cmrun -n 2 --transport "$transport" sh -c '[ "$CHANMEM_RANK" = 1 ] && kill -KILL $$; exec sleep 30'
	expect_status 137 "rank killed by SIGKILL"
	expect_err "cmrun: rank 1 killed by signal SIGKILL" "rank killed by SIGKILL"

	note "transport $transport: an exit status above 128 passes through"
	run_cmrun -n 1 --transport "$transport" sh -c 'exit 200'
	expect_status 200 "exit 200"
done

note "--timeout"
run_cmrun -n 2 --transport direct --timeout 300ms sleep 30
expect_status 124 "timeout"
expect_err "cmrun: timeout after 300ms" "timeout"
run_cmrun -n 2 --transport direct --timeout 30s true
expect_status 0 "timeout not reached"
finish
