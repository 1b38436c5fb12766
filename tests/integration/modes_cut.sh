#!/bin/bash
# unit/test_core_cut_live against every mode (1 and 4 threads where the mode
# takes --threads): cut-through forwarding in the real cmserver -- a large
# message reaches the receiver while it is still arriving, not with
# --cut-through-min 0, and a sender that dies mid-payload is resumed by its
# re-send. MODES_ONLY / MODES_THREADS as in modes_pt2pt.sh.
live=${LIVE_TEST:-./unit/test_core_cut_live}
status=0
for mode in ${MODES_ONLY:-mono thread-per-client multiplexer specialized}; do
	case $mode in
	multiplexer | specialized) counts=${MODES_THREADS:-1 4} ;;
	*) counts=1 ;;
	esac
	for n in $counts; do
		echo "=== mode $mode, threads $n"
		CHANMEM_TEST_MODE=$mode CHANMEM_CM_THREADS=$n CK_FORK=yes "$live" || status=1
	done
done
exit $status
