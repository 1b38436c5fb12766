#!/bin/bash
# stress_random (64 ranks, random sizes 0 B-1 MiB, random tags, wildcard
# receives, checksums checked by the receivers) over 2 CMs, for every mode
# and 1, 2, 4 threads where the mode takes --threads. MODES_ONLY / MODES_THREADS
# as in modes_pt2pt.sh; STRESS_ARGS="ROUNDS SENDS SEED" (default 6 4 12345).
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup
read -r rounds sends seed <<<"${STRESS_ARGS:-6 4 12345}"
echo "stress_random: 64 ranks, $rounds rounds: $((64 * rounds * sends)) messages verified" \
	>"$itest_work/stress.expected"
ITEST_EXPECTED_DIR=$itest_work
for mode in ${MODES_ONLY:-mono thread-per-client multiplexer specialized}; do
	case $mode in
	multiplexer | specialized) counts=${MODES_THREADS:-1 2 4} ;;
	*) counts=1 ;;
	esac
	for n in $counts; do
		CHANMEM_CM_THREADS=$n itest_expect_success "stress_${mode}_$n" stress 64 \
			--transport cm --cms 2 --mode "$mode" -- stress_random "$rounds" "$sends" "$seed"
	done
done
itest_finish
