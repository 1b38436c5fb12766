#!/bin/bash
# Seeded random-kill soak: SOAK_RUNS runs (default 4 in `make check`; `make
# check-soak` runs 50), each a random pattern of programs/ft_suite under
# cmrun's --kill-every with a random seed, against a cmserver mode chosen by
# the run number (or CHANMEM_TEST_MODE), each bounded by --timeout 20s. Every
# run must end with the failure-free output. The seeds are printed: a failing
# run is reproduced with SOAK_SEED=S SOAK_RUNS=1.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
ITERS=20
RUNS=${SOAK_RUNS:-4}
SEED=${SOAK_SEED:-$(date +%s)}
PATTERNS=(ring alltoall ssend master)
MODES=(mono thread-per-client multiplexer specialized)
itest_log "soak: $RUNS runs, first seed $SEED"
ITEST_JOB_TIMEOUT=20s

for p in "${PATTERNS[@]}"; do
	ft_ref "soak_ref_$p" -- ft_suite "$p" "$ITERS"
done

RANDOM=$SEED
for ((i = 0; i < RUNS; i++)); do
	seed=$((SEED + i))
	p=${PATTERNS[RANDOM % ${#PATTERNS[@]}]}
	mode=${CHANMEM_TEST_MODE:-${MODES[i % ${#MODES[@]}]}}
	kills=$((1 + RANDOM % 3))
	every=$((60 + RANDOM % 120))ms
	CHANMEM_TEST_MODE=$mode FT_SLEEP_MS=10 ft_same "soak_${i}_${p}_${mode}_seed$seed" \
		"soak_ref_$p" --kill-every "$every" --kill-count "$kills" --seed "$seed" -- \
		ft_suite "$p" "$ITERS"
done

itest_finish
