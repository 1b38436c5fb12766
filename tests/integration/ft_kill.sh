#!/bin/bash
# Fault tolerance end to end (transport cm): a rank killed mid-run is
# restarted and replayed, and the job's output and exit status are those of
# the failure-free run, byte for byte. programs/ft_suite kills itself at a
# chosen iteration on its first incarnation(s) (FT_KILL_*), which makes the
# point of failure deterministic; --kill-every covers cmrun's own injection.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
ITERS=30

for p in ring pingpong alltoall ssend; do
	ft_ref "ft_ref_$p" -- ft_suite "$p" "$ITERS"
done

# One kill mid-run, for every pattern.
for p in ring pingpong alltoall ssend; do
	FT_KILL_RANK=1 FT_KILL_AT=15 ft_same "ft_kill1_$p" "ft_ref_$p" -- ft_suite "$p" "$ITERS"
done

# Every rank position, at the start, the middle and the last iteration.
for r in 0 1 2 3; do
	for at in 0 14 29; do
		FT_KILL_RANK=$r FT_KILL_AT=$at ft_same "ft_ring_r${r}_at$at" ft_ref_ring -- \
			ft_suite ring "$ITERS"
	done
done

# The same rank killed twice in a row (its first re-execution dies too).
FT_KILL_RANK=2 FT_KILL_AT=10 FT_KILL_TIMES=2 ft_same ft_twice_ssend ft_ref_ssend -- \
	ft_suite ssend "$ITERS"
FT_KILL_RANK=0 FT_KILL_AT=20 FT_KILL_TIMES=3 ft_same ft_thrice_alltoall ft_ref_alltoall -- \
	ft_suite alltoall "$ITERS"

# Seeded random kills by cmrun while the ranks sleep 10 ms per iteration.
for seed in 1 2 3; do
	FT_SLEEP_MS=10 ft_same "ft_every_seed$seed" ft_ref_ring --kill-every 120ms \
		--kill-count 3 --seed "$seed" -- ft_suite ring "$ITERS"
done
FT_SLEEP_MS=10 ft_same ft_every_alltoall ft_ref_alltoall --kill-every 150ms --kill-rank 3 \
	--kill-count 2 -- ft_suite alltoall "$ITERS"
FT_SLEEP_MS=10 ft_same ft_kill_at ft_ref_pingpong --kill-at 1:100ms -- \
	ft_suite pingpong "$ITERS"

# Past --max-restarts the job fails, saying why, with the signal's status.
name=ft_max_restarts
if itest_selected $name; then
	clean=0
	FT_KILL_RANK=1 FT_KILL_AT=5 FT_KILL_TIMES=9 itest_run $name "$NP" --max-restarts 2 -- \
		ft_suite ring "$ITERS" || clean=1
	if [ "$itest_rc" -ne 137 ]; then
		itest_fail $name "exit status $itest_rc, expected 137 (SIGKILL)"
	elif ! grep -q "rank 1 killed by signal SIGKILL; not restarted: it reached --max-restarts 2" \
		"$itest_work/$name.err"; then
		itest_fail $name "stderr does not say why the job failed"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

# The direct transport cannot restart: a killed rank stops the job as before.
name=ft_direct_stops
if itest_selected $name; then
	clean=0
	FT_KILL_RANK=1 FT_KILL_AT=5 itest_run $name "$NP" --transport direct -- \
		ft_suite ring "$ITERS" || clean=1
	# Rank 1's death or a peer's error on its closed connection, whichever
	# cmrun sees first, stops the job.
	if [ "$itest_rc" -eq 0 ] || ! grep -q "^cmrun: rank [0-9]* " "$itest_work/$name.err"; then
		itest_fail $name "exit status $itest_rc, expected a failure and a message"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

# Fault-injection options are validated.
itest_bad_option() { # NAME PATTERN [cmrun options]
	itest_bad_usage "$1" "$NP" "$2" "${@:3}" -- ft_suite ring 1
}
itest_bad_option ft_opt_count_alone "go with --kill-every" --kill-count 3
itest_bad_option ft_opt_every_bad "--kill-every takes a duration" --kill-every soon
itest_bad_option ft_opt_rank_range "--kill-rank 9: the job has ranks 0 to 3" --kill-every 1s --kill-rank 9
itest_bad_option ft_opt_signal "--kill-signal takes" --kill-every 1s --kill-signal NOPE
itest_bad_option ft_opt_direct "needs --transport cm" --transport direct --kill-at 0:1s
itest_bad_option ft_opt_restarts "--max-restarts takes" --max-restarts -1

itest_finish
