#!/bin/bash
# The outcomes of MPI_Test, Testany, Testall, Testsome, Waitany, Waitsome
# (events logged at the rank's home CM) and of MPI_Iprobe (recorded by the
# CM) are replayed to a re-executed rank (transport cm). Arrival times differ
# from run to run, so a killed run is checked against itself:
# programs/ft_nondet makes rank 0 take each round's messages with one of
# those calls, note what it saw (failed polls, order of the senders) and
# send that to the others, whose flow depends on it; after rank 0 is killed
# and re-executed, its summary (the re-execution's) must equal what the
# others received (the dead incarnation's, for the rounds before the kill)
# and its round lines. The CM's report (cmrun -v -v hands --verbose to
# cmserver) shows events were replayed. The same program runs under the
# direct transport and under replication with the master of rank 0 killed,
# and a re-execution that takes another path is stopped with an error
# instead of hanging.
here=$(dirname "$0")
# A run passes in about a second; a replay gone wrong may hang until this.
ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-60s}
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

ROUNDS=40
NP=4

# nondet_consistent NAME NP: every rank's "rounds" line is the same, rank
# 0's round lines agree with it, and each receiver's checksum is the same.
nondet_consistent() {
	local name=$1 np=$2 out="$itest_work/$1.out"
	local lines
	lines=$(grep -c '^rank [0-9]* rounds:' "$out")
	[ "$lines" -eq "$np" ] || {
		echo "$lines summary lines, expected $np"
		return 1
	}
	local distinct
	distinct=$(sed -n 's/^rank [0-9]* rounds://p' "$out" | sort -u | wc -l)
	[ "$distinct" -eq 1 ] || {
		echo "ranks disagree on what rank 0 saw:"
		grep '^rank [0-9]* rounds:' "$out" | cut -c 1-200
		return 1
	}
	local rounds summary
	rounds=$(sed -n 's/^round [0-9]*:\(.*\)$/\1/p' "$out" | tr -d '\n')
	summary=$(sed -n 's/^rank 0 rounds://p' "$out")
	[ "$rounds" = "$summary" ] || {
		echo "rank 0's round lines differ from its summary"
		return 1
	}
	distinct=$(sed -n 's/^rank [0-9]* checksum: //p' "$out" | sort -u | wc -l)
	[ "$distinct" -eq 1 ] || {
		echo "receivers' checksums differ"
		return 1
	}
}

# nondet_job NAME KILL_AT [cmrun options]: ft_nondet with rank 0 killed
# after round KILL_AT (-1: no kill).
nondet_job() {
	local name=$1 at=$2
	shift 2
	itest_selected "$name" || return 0
	local clean=0 why replayed
	FT_KILL_AT=$at itest_run "$name" "$NP" "$@" -- ft_nondet "$ROUNDS" || clean=1
	replayed=$(replayed_events "$name")
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! why=$(nondet_consistent "$name" "$NP"); then
		itest_fail "$name" "$why"
	elif [ "$at" -ge 0 ] && ! grep -q "restarting it as incarnation 1" "$itest_work/$name.err"; then
		itest_fail "$name" "rank 0 was not killed and restarted"
	elif [ "$at" -ge 0 ] && [ "$replayed" -le "$at" ]; then
		# Every round logs at least one outcome (the end message's failed poll).
		itest_fail "$name" "$replayed events replayed, expected more than $at"
	elif [ "$at" -lt 0 ] && [ "$replayed" -ne 0 ]; then
		itest_fail "$name" "$replayed events replayed without a failure"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

nondet_job ft_nondet_ref -1 -v -v
# Killed after a full cycle of the eight methods and four more rounds.
nondet_job ft_nondet_kill 12 -v -v
nondet_job ft_nondet_kill_first 0 -v -v
# Two channel memories: rank 0's sends to ranks homed on the other CM wait
# for its outcomes to be acknowledged by its home first.
nondet_job ft_nondet_cms2 20 -v -v --cms 2
# Killed twice: the second re-execution replays what the first logged too.
FT_KILL_TIMES=2 nondet_job ft_nondet_twice 16 -v -v
# The direct transport logs nothing and runs the same program.
nondet_job ft_nondet_direct -1 --transport direct

# Replication (--replicate r): the master of rank 0 decides the outcomes,
# probe answers and MPI_ANY_SOURCE matches, and its replicas take them (one
# of them reads each round's messages late, in another order); killing the
# master makes a replica that followed it master, and the run goes on
# consistent.
repl_job() {
	local name=$1 r=$2 at=$3
	itest_selected "$name" || return 0
	local clean=0 why
	# No channel memory here: CHANMEM_TEST_MODE's --mode does not apply.
	CHANMEM_TEST_MODE= FT_KILL_REPLICA=0 FT_SLOW_REPLICA=1 FT_KILL_AT=$at \
		itest_run "$name" "$NP" -v \
		--replicate "$r" -- ft_nondet "$ROUNDS" || clean=1
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! why=$(nondet_consistent "$name" "$NP"); then
		itest_fail "$name" "$why"
	elif [ "$at" -ge 0 ] && ! grep -q "rank 0 replica 0 .*killed by signal" "$itest_work/$name.err"; then
		itest_fail "$name" "rank 0's master was not killed"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}
repl_job ft_nondet_repl2 2 -1
repl_job ft_nondet_repl2_master 2 12
repl_job ft_nondet_repl3_master 3 20

# A re-execution that calls MPI_Test where the run it replays called
# MPI_Testany cannot follow the log: a clear error, the job stops.
name=ft_nondet_diverge
if itest_selected $name; then
	clean=0
	FT_DIVERGE=1 FT_KILL_AT=9 itest_run $name "$NP" -- ft_nondet "$ROUNDS" || clean=1
	if [ "$itest_rc" -eq 0 ]; then
		itest_fail $name "exit status 0, expected a failure"
	elif ! grep -q "rank 0: MPI_Test: cannot follow the logged outcome" "$itest_work/$name.err"; then
		itest_fail $name "stderr does not say the re-execution diverged"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

itest_finish
