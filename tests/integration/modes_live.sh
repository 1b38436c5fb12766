#!/bin/bash
# unit/test_engines_live against every mode (1, 2, 4 threads where the mode
# takes --threads): refusals, a stalled reader, SIGTERM, replaced
# incarnations. MODES_ONLY / MODES_THREADS as in modes_pt2pt.sh.
live=${LIVE_TEST:-./unit/test_engines_live}
status=0
for mode in ${MODES_ONLY:-mono thread-per-client multiplexer specialized}; do
	case $mode in
	multiplexer | specialized) counts=${MODES_THREADS:-1 2 4} ;;
	*) counts=1 ;;
	esac
	for n in $counts; do
		echo "=== mode $mode, threads $n"
		CHANMEM_TEST_MODE=$mode CHANMEM_CM_THREADS=$n CK_FORK=yes "$live" || status=1
	done
done
exit $status
