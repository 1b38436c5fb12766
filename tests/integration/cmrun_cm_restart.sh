#!/bin/bash
# cmrun --cm-restart: a channel memory killed during the run (--kill-cm-at,
# --kill-cm-every) is started again with the same command line, on the TCP
# port and abstract unix name it had, with the same --journal file in a
# private directory that is gone when cmrun ends, however the job ends;
# ranks get CHANMEM_CM_RECONNECT; the fault report lists the deaths and
# restarts; --max-cm-restarts stops the job; bad options are refused with
# status 2. The ranks are shell scripts: they never connect to a CM, so this
# tests cmrun's side only (tests/integration/ft_* run programs through it).
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
need_cmserver
CM_ARGS_FILE=$T/cm.args
CHANMEM_CMSERVER=$HELPERS/journal_cmserver.sh
ERR_FILE=$T/err
export CM_ARGS_FILE CHANMEM_CMSERVER ERR_FILE

# A rank that waits (bounded) until cmrun said WANT times that a restarted
# CM listens again, then prints its rank.
WAIT_RANK='i=0
while [ $i -lt 400 ] && [ "$(grep -c "listening again on" "$ERR_FILE")" -lt "$WANT" ]; do
	sleep 0.1; i=$((i + 1))
done
echo rank $CHANMEM_RANK'

# cm_starts K: the command lines CM K was started with, one per line
# (the journal names it).
cm_starts() {
	grep -- "/cm-$1.journal" "$CM_ARGS_FILE"
}

# word_after WORD LINE: the word following WORD in LINE.
word_after() {
	printf '%s\n' "$2" | tr ' ' '\n' | grep -A1 -x -- "$1" | tail -n 1
}

journal_dirs() {
	tr ' ' '\n' <"$CM_ARGS_FILE" | grep '/cm-[0-9]*\.journal$' | sed 's|/cm-[0-9]*\.journal$||' |
		sort -u
}

expect_journal_gone() {
	dirs=$(journal_dirs)
	[ -n "$dirs" ] || fail "no CM got --journal ($1): $(cat "$CM_ARGS_FILE")"
	[ "$(printf '%s\n' "$dirs" | wc -l)" = 1 ] || fail "several journal directories ($1): $dirs"
	[ ! -e "$dirs" ] || fail "the journal directory $dirs is left after the job ($1)"
}

note "two CMs killed once each come back on the same addresses with the same journals"
WANT=2 run_cmrun -n 3 --cms 2 -v --cm-restart --kill-cm-at 1:300ms --kill-cm-at 0:100ms \
	sh -c "$WAIT_RANK"
expect_status 0 "CMs killed and restarted"
[ "$(sort "$T/out")" = "$(printf 'rank 0\nrank 1\nrank 2')" ] || fail "rank output: $(cat "$T/out")"
for k in 0 1; do
	starts=$(cm_starts $k)
	[ "$(printf '%s\n' "$starts" | wc -l)" = 2 ] || fail "CM $k was not started twice: $starts"
	first=$(printf '%s\n' "$starts" | head -n 1)
	again=$(printf '%s\n' "$starts" | tail -n 1)
	# What it reported the first time, and what cmrun says it listens on again.
	addr=$(sed -n "s/^cmrun: cmserver $k (pid [0-9]*) listening on \([^ ]*\) \(unix:@[^ ]*\)$/\1 \2/p" "$T/err")
	back=$(sed -n "s/^cmrun: cmserver $k (pid [0-9]*) listening again on \([^ ]*\) \(unix:@[^ ]*\)$/\1 \2/p" "$T/err")
	[ -n "$addr" ] && [ "$addr" = "$back" ] ||
		fail "CM $k listened on '$addr' first, on '$back' after its restart: $(cat "$T/err")"
	[ "$(word_after --listen "$first")" = 127.0.0.1:0 ] || fail "CM $k's first --listen: $first"
	[ "$(word_after --listen "$again") $(word_after --unix "$again")" = "$addr" ] ||
		fail "CM $k was not restarted on $addr: $again"
	[ "$(word_after --journal "$first")" = "$(word_after --journal "$again")" ] ||
		fail "CM $k got another journal when restarted: $first / $again"
	# Apart from the address (and descriptor numbers) the same command line.
	[ "$(printf '%s\n' "$first" | sed 's/ --listen [^ ]*//; s/-fd [0-9]*/-fd N/g')" = \
		"$(printf '%s\n' "$again" | sed 's/ --listen [^ ]*//; s/ --unix [^ ]*//; s/-fd [0-9]*/-fd N/g')" ] ||
		fail "CM $k's command lines differ: $first / $again"
	grep -q "cmrun: --kill-cm-at: SIGKILL to cmserver $k" "$T/err" || fail "no kill of CM $k"
	grep -qF "cmrun:   cmserver $k: 1 injected kill; 1 restart; listening again" "$T/err" ||
		fail "the fault report lacks CM $k: $(cat "$T/err")"
done
expect_err "0 other rank failures, 0 restarts over 0 ranks, 2 cmserver failures" "report"
expect_err "cmrun:   channel memories: 2 restarts" "report"
expect_journal_gone "success"
case $(journal_dirs) in "${TMPDIR:-/tmp}"/cmrun-journal-*) ;; *) fail "journal directory $(journal_dirs) not under \$TMPDIR" ;; esac
rm -f "$CM_ARGS_FILE"

note "ranks get CHANMEM_CM_RECONNECT with --cm-restart, and only then"
CHANMEM_CM_RECONNECT=99 run_cmrun -n 2 --cm-restart sh -c 'echo "[$CHANMEM_CM_RECONNECT]"'
expect_status 0 "--cm-restart environment"
[ "$(cat "$T/out")" = "$(printf '[30]\n[30]')" ] || fail "with --cm-restart: $(cat "$T/out")"
expect_journal_gone "environment"
rm -f "$CM_ARGS_FILE"
CHANMEM_CM_RECONNECT=99 run_cmrun -n 1 sh -c 'echo "[$CHANMEM_CM_RECONNECT]"'
[ "$(cat "$T/out")" = "[]" ] || fail "without --cm-restart a rank got: $(cat "$T/out")"
! grep -q -- --journal "$CM_ARGS_FILE" || fail "--journal without --cm-restart: $(cat "$CM_ARGS_FILE")"
rm -f "$CM_ARGS_FILE"

note "the journals go under --spill-dir, and are gone after a failed job"
mkdir "$T/spill"
run_cmrun -n 2 --cm-restart --spill-dir "$T/spill" sh -c 'exit $((CHANMEM_RANK * 3))'
expect_status 3 "failing rank"
case $(journal_dirs) in "$T/spill"/cmrun-journal-*) ;; *) fail "journal directory $(journal_dirs) not under --spill-dir" ;; esac
expect_journal_gone "failed job"
[ -z "$(ls -A "$T/spill")" ] || fail "left in the spill directory: $(ls -A "$T/spill")"
rm -f "$CM_ARGS_FILE"

note "... after a timeout"
run_cmrun -n 1 --cm-restart --timeout 300ms sleep 30
expect_status 124 "timeout"
expect_journal_gone "timeout"
rm -f "$CM_ARGS_FILE"

note "... after a SIGTERM to cmrun once the CM was restarted"
start_cmrun -n 1 -v --cm-restart --kill-cm-at 0:10ms sleep 30
wait_lines 30 "$CM_ARGS_FILE" 2 || fail "the CM was not restarted: $(cat "$T/err")"
kill -TERM "$CMRUN_PID"
wait_cmrun
expect_status 143 "SIGTERM"
expect_journal_gone "SIGTERM"
rm -f "$CM_ARGS_FILE"

note "--kill-cm-every, seeded: the CM is killed and restarted --kill-count times"
WANT=2 run_cmrun -n 2 -v --cm-restart --kill-cm-every 200ms --kill-count 2 --seed 5 \
	sh -c "$WAIT_RANK"
expect_status 0 "--kill-cm-every"
[ "$(cm_starts 0 | wc -l)" = 3 ] || fail "CM 0 was not started 3 times: $(cat "$CM_ARGS_FILE")"
[ "$(grep -c "cmrun: --kill-cm-every: SIGKILL to cmserver 0" "$T/err")" = 2 ] ||
	fail "not 2 kills: $(cat "$T/err")"
expect_err "cmrun:   cmserver 0: 2 injected kills; 2 restarts; listening again" "report"
expect_journal_gone "--kill-cm-every"
rm -f "$CM_ARGS_FILE"

note "--max-cm-restarts: a death past it stops the job, named"
# Rank 0 kills the restarted CM itself (a death cmrun did not inject).
WANT=1 run_cmrun -n 2 -v --cm-restart --max-cm-restarts 1 --kill-cm-at 0:100ms sh -c "$WAIT_RANK
	[ \$CHANMEM_RANK = 0 ] &&
		kill -KILL \$(sed -n 's/^cmrun: cmserver 0 (pid \\([0-9]*\\)) listening again.*/\\1/p' \"\$ERR_FILE\")
	sleep 30"
expect_status 1 "--max-cm-restarts"
expect_err "killed by signal SIGKILL; not restarted: it reached --max-cm-restarts 1; stopping the job" "limit"
expect_err "cmrun:   cmserver 0: 1 injected kill, 1 death (killed by signal SIGKILL); 1 restart; listening again" "limit report"
[ "$(cm_starts 0 | wc -l)" = 2 ] || fail "CM 0 was not started twice: $(cat "$CM_ARGS_FILE")"
expect_journal_gone "--max-cm-restarts"
rm -f "$CM_ARGS_FILE"

note "a restarted CM that dies before it listens is started again after a pause"
WANT=1 JOURNAL_CMSERVER_FAIL=2 run_cmrun -n 1 -v --cm-restart --kill-cm-at 0:100ms \
	sh -c "$WAIT_RANK"
expect_status 0 "failed restart"
[ "$(cm_starts 0 | wc -l)" = 3 ] || fail "CM 0 was not started 3 times: $(cat "$CM_ARGS_FILE")"
expect_err "exited with status 1: restarting it on 127.0.0.1:" "retry"
expect_err "(restart 2 of 3)" "retry"
expect_err "cmrun:   cmserver 0: 1 injected kill, 1 death (exited with status 1); 2 restarts; listening again" "retry report"
expect_journal_gone "failed restart"
rm -f "$CM_ARGS_FILE"

note "a CM that comes back on another address stops the job"
JOURNAL_CMSERVER_MOVE=2 run_cmrun -n 1 --cm-restart --kill-cm-at 0:100ms sleep 30
expect_status 1 "moved CM"
grep -q "^cmrun: error: cmserver 0 came back on 127.0.0.1:[0-9]* unix:@[0-9a-f]*, not on 127.0.0.1:[0-9]* unix:@[0-9a-f]*$" "$T/err" ||
	fail "no error for a CM on another address: $(cat "$T/err")"
expect_journal_gone "moved CM"
rm -f "$CM_ARGS_FILE"

note "a CM on a host started through a launcher comes back the same way"
printf 'a slots=2 addr=127.0.0.1 roles=rank,cm\n' >"$T/hosts"
WANT=1 run_cmrun -n 2 -v --hosts "$T/hosts" --launch "exec {cmd}" --cm-restart \
	--kill-cm-at 0:100ms sh -c "$WAIT_RANK"
expect_status 0 "remote CM restart"
[ "$(cm_starts 0 | wc -l)" = 2 ] || fail "CM 0 was not started twice: $(cat "$CM_ARGS_FILE")"
expect_err "cmrun:   cmserver 0: 1 injected kill; 1 restart" "remote report"
expect_journal_gone "remote"
rm -f "$CM_ARGS_FILE"

note "bad options are refused before anything starts"
refused "--kill-cm-at and --kill-cm-every kill channel memories: they need --cm-restart" \
	-n 1 --kill-cm-at 0:1s true
refused "they need --cm-restart (without it a CM's death stops the job)" \
	-n 1 --kill-cm-every 1s true
refused "--max-cm-restarts goes with --cm-restart" -n 1 --max-cm-restarts 2 true
refused "--cm-restart needs --transport cm" -n 2 --transport direct --cm-restart true
refused "--cm-restart needs --transport cm" -n 2 --replicate 2 --cm-restart true
refused "--kill-cm-at: cmserver 2 is not in the job (CMs 0 to 1)" \
	-n 2 --cms 2 --cm-restart --kill-cm-at 2:1s true
for bad in 0 1: :1s x:1s -1:1s 1:soon 1:-1s 256:1s; do
	refused "--kill-cm-at takes CM:DELAY such as 0:200ms, not '$bad'" \
		-n 1 --cm-restart --kill-cm-at "$bad" true
done
refused "--kill-cm-every takes a duration of at least 1ms such as 500ms or 2s, not '0'" \
	-n 1 --cm-restart --kill-cm-every 0 true
refused "--kill-cm-every takes a duration of at least 1ms" -n 1 --cm-restart --kill-cm-every x true
refused "--max-cm-restarts takes a number from 0 to 1000000, not '-1'" \
	-n 1 --cm-restart --max-cm-restarts -1 true
refused "--kill-rank, --kill-count, --kill-signal and --seed go with --kill-every" \
	-n 1 --cm-restart --kill-cm-every 1s --kill-signal TERM true
refused "(--kill-count and --seed also with --kill-cm-every)" -n 1 --cm-restart --seed 3 true
set --
i=0
while [ "$i" -le 64 ]; do
	set -- "$@" --kill-cm-at 0:1s
	i=$((i + 1))
done
refused "--kill-cm-at is given more than 64 times" -n 1 --cm-restart "$@" true
finish
