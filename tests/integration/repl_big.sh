#!/bin/bash
# Replication: a master killed in the middle of a large send. ft_suite's big pattern sends 8 MiB messages around a ring of 4 ranks
# (MPI_Isend, MPI_Recv, MPI_Wait; every byte checked) and its victims raise
# SIGKILL right after starting the iteration's MPI_Isend: the master dies
# with its message to the next rank half written (loopback socket buffers
# hold far less than 8 MiB, and large messages go to every destination
# replica at once). The receivers must drop the partial copy, the killed
# master's next replica must take over and re-send the message whole, and
# the output must be the non-replicated run's, byte for byte, exit 0, no
# leftover processes. Under r = 2 and 3; the master alone, the master and
# its successor at once (r = 3), and the masters of two ranks at once.
# programs/repl_suite: REPL_KILL_REPLICAS picks the replicas of each rank
# of FT_KILL_RANK that die at iteration FT_KILL_AT.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup
unset CHANMEM_TEST_MODE # no channel memory in this mode: --mode does not apply

NP=4
ITERS=5
KILL_AT=2

big_sorted() {
	sort -s -k1,1 "$itest_work/$1.out"
}

ref=repl_big_ref
itest_run "$ref" "$NP" --transport direct --tag-output -- repl_suite big "$ITERS"
if [ "$itest_rc" -ne 0 ]; then
	itest_fail "$ref" "reference run exit status $itest_rc"
	itest_finish
	exit
fi
big_sorted "$ref" >"$itest_work/$ref.sorted"
itest_pass "$ref"

# big_same NAME R [RANKS REPLICAS]: the replicas REPLICAS of every rank in
# RANKS die at iteration KILL_AT; cmrun -v must report each kill.
big_same() {
	local name=$1 r=$2 ranks=${3:-} replicas=${4:-}
	itest_selected "$name" || return 0
	local clean=0 kills=0
	if [ -n "$ranks" ]; then
		kills=$(($(tr ',' '\n' <<<"$ranks" | wc -l) * $(tr ',' '\n' <<<"$replicas" | wc -l)))
		FT_KILL_RANK=$ranks FT_KILL_AT=$KILL_AT REPL_KILL_REPLICAS=$replicas \
			itest_run "$name" "$NP" -v --replicate "$r" --tag-output -- \
			repl_suite big "$ITERS" || clean=1
	else
		itest_run "$name" "$NP" -v --replicate "$r" --tag-output -- \
			repl_suite big "$ITERS" || clean=1
	fi
	local seen
	seen=$(grep -c 'killed by signal SIGKILL;.*not restarted' "$itest_work/$name.err")
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
		grep -v '^cmrun: ' "$itest_work/$name.err" | head -n 5 | sed 's/^/    /'
	elif ! diff -u "$itest_work/$ref.sorted" <(big_sorted "$name") >"$itest_work/$name.diff"; then
		itest_fail "$name" "output differs from the non-replicated run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif [ "$seen" -ne "$kills" ]; then
		itest_fail "$name" "$seen replicas killed, expected $kills"
	elif grep -v '^cmrun: ' "$itest_work/$name.err" |
		grep -vqE 'connection (to|from) rank [0-9]+ replica [0-9]+:'; then
		itest_fail "$name" "unexpected output on stderr:"
		grep -v '^cmrun: ' "$itest_work/$name.err" | head -n 5 | sed 's/^/    /'
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

big_same repl_r2_big_nokill 2
big_same repl_r2_big_master 2 1 0
big_same repl_r3_big_master 3 1 0
big_same repl_r3_big_two_replicas 3 1 0,1
big_same repl_r2_big_two_ranks 2 1,3 0
big_same repl_r3_big_two_ranks 3 0,2 0
itest_finish
