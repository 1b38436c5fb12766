#!/bin/bash
# stress_random (64 ranks, random sizes 0 B-1 MiB, random tags, wildcard
# receives, checksums checked by the receivers) over 2 CMs, for every mode
# and 1, 2, 4 threads where the mode takes --threads. MODES_ONLY / MODES_THREADS
# as in lib.sh's itest_each_mode; STRESS_ARGS="ROUNDS SENDS SEED" (default 6 4 12345).
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup
read -r rounds sends seed <<<"${STRESS_ARGS:-6 4 12345}"
echo "stress_random: 64 ranks, $rounds rounds: $((64 * rounds * sends)) messages verified" \
	>"$itest_work/stress.expected"
ITEST_EXPECTED_DIR=$itest_work

# One run in the mode and thread count itest_each_mode sets.
stress_run() {
	local mode=$CHANMEM_TEST_MODE threads=$CHANMEM_CM_THREADS
	itest_expect_success "stress_${mode}_$threads" stress 64 \
		--transport cm --cms 2 --mode "$mode" -- stress_random "$rounds" "$sends" "$seed"
}

itest_each_mode "1 2 4" stress_run
itest_finish
