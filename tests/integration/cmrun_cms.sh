#!/bin/bash
# cmrun starts K cmservers before the ranks, every rank can connect to each
# address in CHANMEM_CMS, and no cmserver is left once the job is over. A
# cmserver that fails at start-up stops the job with a clear message.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
need_cmserver
command -v bash >/dev/null || skip "bash (for /dev/tcp) not installed"

# Each rank opens a TCP connection to every CM and says which it reached
# (--cm-socket tcp: by default ranks get the CMs' unix addresses, cm_unix.sh).
CONNECT='
for addr in $(echo "$CHANMEM_CMS" | tr , " "); do
	if exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}"; then
		echo "rank $CHANMEM_RANK reached $addr"
		exec 3>&-
	fi
done'

for k in 1 3; do
	note "$k cmserver(s), 4 ranks connect to each"
	run_cmrun -n 4 --cms "$k" --cm-socket tcp -v bash -c "
		[ \$CHANMEM_RANK = 0 ] && sh '$HELPERS/record_cms.sh' '$T/pids.cms' \$PPID
		$CONNECT"
	expect_status 0 "connect to $k CMs"
	[ "$(grep -c "^rank [0-3] reached 127\.0\.0\.1:[0-9]*$" "$T/out")" = $((4 * k)) ] ||
		fail "not every rank reached every CM: $(cat "$T/out") $(cat "$T/err")"
	[ "$(grep -c "cmrun: cmserver [0-9]* (pid [0-9]*) listening on 127\.0\.0\.1:" "$T/err")" = "$k" ] ||
		fail "-v does not report $k cmservers: $(cat "$T/err")"
	[ "$(wc -l <"$T/pids.cms")" = "$k" ] || fail "expected $k cmserver processes"
	wait_gone 10 "$T/pids.cms" || fail "cmserver left running after the job"
	rm -f "$T/pids.cms"
done

note "a cmserver that exits at start-up"
CHANMEM_CMSERVER=$HELPERS/fake_cmserver.sh FAKE_CMSERVER=exit
export CHANMEM_CMSERVER FAKE_CMSERVER
run_cmrun -n 2 --cms 2 sh -c 'echo "rank ran"'
expect_status 1 "cmserver exits"
expect_err "fake cmserver: failing on purpose" "cmserver exits"
expect_err "exited with status 3 while starting; stopping the job" "cmserver exits"
! grep -q "rank ran" "$T/out" || fail "ranks started without their cmservers"

note "a cmserver that reports a bad address"
FAKE_CMSERVER=garbage
run_cmrun -n 2 sh -c 'echo "rank ran"'
expect_status 1 "bad address"
expect_err "cmserver 0 reported 'not-an-address', not a HOST:PORT address" "bad address"
! grep -q "rank ran" "$T/out" || fail "ranks started without their cmservers"
finish
