#!/bin/bash
# MPI_Wtime values (and the program's gettimeofday and time) are events logged at the rank's home CM and replayed to a
# re-executed rank (transport cm). Times differ from run to run, so a killed
# run is checked against itself: programs/ft_wtime makes rank 0 decide how
# many messages to send from the clock and every rank print what it decided
# or received; after rank 0 is killed and re-executed, its decisions (the
# re-execution's, printed at the end) must equal what the others received
# (the dead incarnation's, for the rounds before the kill). The CM's report
# (cmrun -v -v hands --verbose to cmserver) shows the values were replayed.
# Then NPcm, whose repeat counts come from MPI_Wtime, under --kill-at of
# rank 0 with verification on.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

ROUNDS=40
NPCM=${NPCM:-$(dirname "$CMRUN")/../netpipe/NPcm}

# wtime_consistent NAME NP: every rank's "counts" line is the same, rank 0's
# per-round lines agree with it, and each receiver's checksum is the same.
wtime_consistent() {
	local name=$1 np=$2 out="$itest_work/$1.out"
	local lines
	lines=$(grep -c '^rank [0-9]* counts:' "$out")
	[ "$lines" -eq "$np" ] || {
		echo "$lines summary lines, expected $np"
		return 1
	}
	local distinct
	distinct=$(sed -n 's/^rank [0-9]* counts://p' "$out" | sort -u | wc -l)
	[ "$distinct" -eq 1 ] || {
		echo "ranks disagree on the decisions:"
		grep '^rank [0-9]* counts:' "$out"
		return 1
	}
	local rounds
	rounds=$(sed -n 's/^round [0-9]*: \([0-9]*\) messages$/\1/p' "$out" | tr '\n' ' ')
	local summary
	summary=$(sed -n 's/^rank 0 counts: //p' "$out")
	[ "$rounds" = "$summary " ] || {
		echo "rank 0's round lines ($rounds) differ from its summary ($summary)"
		return 1
	}
	distinct=$(sed -n 's/^rank [0-9]* checksum: //p' "$out" | sort -u | wc -l)
	[ "$distinct" -eq 1 ] || {
		echo "receivers' checksums differ"
		return 1
	}
}

# wtime_job NAME NP KILL_AT [cmrun options]: ft_wtime with rank 0 killed
# after round KILL_AT (-1: no kill).
wtime_job() {
	local name=$1 np=$2 at=$3
	shift 3
	itest_selected "$name" || return 0
	local clean=0 why
	FT_KILL_AT=$at itest_run "$name" "$np" -v -v "$@" -- ft_wtime "$ROUNDS" "${FT_CLOCK:-wtime}" || clean=1
	local replayed
	replayed=$(replayed_events "$name")
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
		grep -v '^cmrun: \|^cmserver: ' "$itest_work/$name.err" | head -n 5 | sed 's/^/    /'
	elif ! why=$(wtime_consistent "$name" "$np"); then
		itest_fail "$name" "$why"
	elif [ "$at" -ge 0 ] && [ "$replayed" -lt $((3 * (at + 1))) ]; then
		itest_fail "$name" "$replayed events replayed, expected at least $((3 * (at + 1)))"
	elif [ "$at" -lt 0 ] && [ "$replayed" -ne 0 ]; then
		itest_fail "$name" "$replayed events replayed without a failure"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

wtime_job ft_wtime_ref 3 -1
wtime_job ft_wtime_kill 3 17
wtime_job ft_wtime_kill_first 3 0
# Two channel memories: rank 0's sends to rank 1 go to another CM than its
# home, so its events must be acknowledged first.
wtime_job ft_wtime_cms2 3 25 --cms 2
# Killed twice: the second re-execution replays what the first logged too.
FT_KILL_TIMES=2 wtime_job ft_wtime_twice 3 30
# The libc clocks of unmodified programs, logged like MPI_Wtime: rank 0
# decides from gettimeofday, or from rand() seeded with time(NULL) plus
# time() itself.
FT_CLOCK=gettimeofday wtime_job ft_gtod_ref 3 -1
FT_CLOCK=gettimeofday wtime_job ft_gtod_kill 3 17
FT_CLOCK=time wtime_job ft_time_kill 3 11 --cms 2

# NPcm: rank 0 (the only rank whose decisions read the clock) killed 400 ms
# after the start; each of the 82 sizes takes at least -t 0.01 s, so it is
# killed mid-run. Verification is on: a wrong or missing byte aborts.
name=ft_wtime_npcm
if ! itest_selected $name; then
	:
elif [ ! -x "$NPCM" ]; then
	itest_log "SKIP: $name: NPcm not built ($NPCM; make -C netpipe)"
else
	clean=0
	# itest_run takes programs relative to PROGDIR.
	itest_run $name 2 -v -v --kill-at 0:400ms -- "$(realpath --relative-to="$PROGDIR" "$NPCM")" \
		-u 65536 -t 0.01 -T 1 -o "$itest_work/np.out" || clean=1
	replayed=$(replayed_events $name)
	# Progress lines " N: ..." are numbered: each exactly once, in order.
	numbers=$(sed -n 's/^ *\([0-9]*\): .*/\1/p' "$itest_work/$name.out" | tr '\n' ' ')
	expected=$(seq 0 81 | tr '\n' ' ')
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail $name "exit status $itest_rc, expected 0"
		grep -v '^cmrun: \|^cmserver: ' "$itest_work/$name.err" | head -n 5 | sed 's/^/    /'
	elif ! grep -q "restarting it as incarnation 1" "$itest_work/$name.err"; then
		itest_fail $name "rank 0 was not killed and restarted"
	elif [ "$numbers" != "$expected" ]; then
		itest_fail $name "progress lines are not 0..81 once each: $numbers"
	elif [ "$(wc -l <"$itest_work/np.out")" -ne 82 ]; then
		itest_fail $name "np.out has $(wc -l <"$itest_work/np.out") lines, expected 82"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		[ "$replayed" -gt 0 ] ||
			itest_log "  note: $name: killed before its first MPI_Wtime (nothing to replay)"
		itest_pass $name
	fi
fi

itest_finish
