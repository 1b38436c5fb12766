#!/bin/bash
# Replication end to end (cmrun --replicate, docs/replication.md): ft_suite's
# deterministic patterns under r = 2 and 3 give the output of the
# non-replicated run, byte for byte, with no failure, with a master killed,
# a non-master killed, and every replica but one of a rank killed (exit 0,
# no restart); killing every replica of a rank fails the job with a message
# saying so. programs/repl_suite is ft_suite whose REPL_KILL_REPLICAS says
# which replicas of FT_KILL_RANK kill themselves at FT_KILL_AT. No leftover
# processes in any case.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup
unset CHANMEM_TEST_MODE # no channel memory in this mode: --mode does not apply

NP=4
ITERS=20
KILL_AT=10

repl_sorted() {
	sort -s -k1,1 "$itest_work/$1.out"
}

# Reference: the direct transport, no replication.
repl_ref() {
	local name=$1 pattern=$2
	itest_run "$name" "$NP" --transport direct --tag-output -- repl_suite "$pattern" "$ITERS"
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "reference run exit status $itest_rc"
		return 1
	fi
	repl_sorted "$name" >"$itest_work/$name.sorted"
	itest_pass "$name"
}

# repl_same NAME REF R PATTERN [KILLED REPLICAS of rank 1]: exit 0, same
# per-rank output as REF, stderr holds at most the survivors' notes about
# connections to the dead replicas, no leftovers.
repl_same() {
	local name=$1 ref=$2 r=$3 pattern=$4 kill=${5:-}
	itest_selected "$name" || return 0
	local clean=0
	if [ -n "$kill" ]; then
		FT_KILL_RANK=1 FT_KILL_AT=$KILL_AT REPL_KILL_REPLICAS=$kill \
			itest_run "$name" "$NP" --replicate "$r" --tag-output -- \
			repl_suite "$pattern" "$ITERS" || clean=1
	else
		itest_run "$name" "$NP" --replicate "$r" --tag-output -- \
			repl_suite "$pattern" "$ITERS" || clean=1
	fi
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
		head -n 5 "$itest_work/$name.err" | sed 's/^/    /'
	elif ! diff -u "$itest_work/$ref.sorted" <(repl_sorted "$name") >"$itest_work/$name.diff"; then
		itest_fail "$name" "output differs from the non-replicated run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif grep -vqE 'connection (to|from) rank [0-9]+ replica [0-9]+:' "$itest_work/$name.err"; then
		itest_fail "$name" "unexpected output on stderr:"
		head -n 5 "$itest_work/$name.err" | sed 's/^/    /'
	elif [ -z "$kill" ] && [ -s "$itest_work/$name.err" ]; then
		itest_fail "$name" "stderr not empty in a failure-free run"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

for p in ring pingpong alltoall ssend; do
	repl_ref "repl_ref_$p" "$p" || continue
	for r in 2 3; do
		repl_same "repl_r${r}_nokill_$p" "repl_ref_$p" "$r" "$p"
		repl_same "repl_r${r}_master_$p" "repl_ref_$p" "$r" "$p" 0
		repl_same "repl_r${r}_nonmaster_$p" "repl_ref_$p" "$r" "$p" $((r - 1))
	done
	repl_same "repl_r3_allbut1_$p" "repl_ref_$p" 3 "$p" 0,1
	repl_same "repl_r3_allbut0_$p" "repl_ref_$p" 3 "$p" 1,2
done

# Every replica of rank 1 killed: the job fails (the rank's death, or a
# peer's failed send to it, whichever is seen first) and says why.
for r in 2 3; do
	name=repl_r${r}_all_dead
	itest_selected $name || continue
	clean=0
	all=$(seq -s, 0 $((r - 1)))
	FT_KILL_RANK=1 FT_KILL_AT=$KILL_AT REPL_KILL_REPLICAS=$all \
		itest_run $name "$NP" --replicate "$r" -- repl_suite ring "$ITERS" || clean=1
	if [ "$itest_rc" -eq 0 ]; then
		itest_fail $name "exit status 0, expected a failure"
	elif ! grep -qE "rank 1: every replica is dead|cannot send to rank 1: every replica of it is dead" \
		"$itest_work/$name.err"; then
		itest_fail $name "stderr does not say every replica of rank 1 is dead"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
done

# NPcm (repeat counts from MPI_Wtime, which the master decides for its
# replicas) under r = 2 with a replica killed mid-run: a non-master of rank
# 1, then rank 0's master. Verification is on: a wrong byte aborts.
NPCM=${NPCM:-$(dirname "$CMRUN")/../netpipe/NPcm}
repl_npcm() {
	local name=$1
	shift
	itest_selected "$name" || return 0
	if [ ! -x "$NPCM" ]; then
		itest_log "SKIP: $name: NPcm not built ($NPCM; make -C netpipe)"
		return 0
	fi
	local clean=0
	# Every replica writes -o: give them a scratch file.
	itest_run "$name" 2 --replicate 2 -v "$@" -- \
		"$(realpath --relative-to="$PROGDIR" "$NPCM")" -u 1024 -t 0.01 \
		-o "$itest_work/$name.np" || clean=1
	local numbers expected
	numbers=$(sed -n 's/^ *\([0-9]*\): .*/\1/p' "$itest_work/$name.out" | tr '\n' ' ')
	expected=$(seq 0 45 | tr '\n' ' ')
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
		grep -v '^cmrun: ' "$itest_work/$name.err" | head -n 5 | sed 's/^/    /'
	elif ! grep -q "killed by signal SIGKILL; 1 replica left" "$itest_work/$name.err"; then
		itest_fail "$name" "no replica was killed"
	elif [ "$numbers" != "$expected" ]; then
		itest_fail "$name" "progress lines are not 0..45 once each: $numbers"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}
repl_npcm repl_npcm_nonmaster --kill-at 1:200ms
repl_npcm repl_npcm_master --kill-at 0:200ms --kill-replica 0

# Options.
repl_bad_option() { # NAME PATTERN [cmrun options]
	itest_bad_usage "$1" "$NP" "$2" "${@:3}" -- repl_suite ring 1
}
repl_bad_option repl_opt_range "--replicate takes a replica count in 1..4" --replicate 5
repl_bad_option repl_opt_transport "drop --transport" --replicate 2 --transport cm
repl_bad_option repl_opt_cms "apply to --transport cm only" --replicate 2 --cms 2
repl_bad_option repl_opt_every "--kill-every does not apply" --replicate 2 --kill-every 1s
repl_bad_option repl_opt_kill_replica "--kill-replica K goes with" --kill-at 0:1s --kill-replica 1
itest_finish
