#!/bin/bash
# The fault-tolerance scenarios (ft_scenarios.sh) and the clock-replay tests
# (ft_wtime.sh) against every cmserver mode, parameterised through
# CHANMEM_TEST_MODE / CHANMEM_CM_THREADS. MODES_ONLY="a b" limits the modes;
# MODES_THREADS overrides the thread counts ("1 4": one loop, and more loops
# than this machine's cores).
here=$(dirname "$0")
status=0
for mode in ${MODES_ONLY:-mono thread-per-client multiplexer specialized}; do
	case $mode in
	multiplexer | specialized) counts=${MODES_THREADS:-1 4} ;;
	*) counts=1 ;;
	esac
	for n in $counts; do
		echo "=== mode $mode, threads $n"
		for t in ft_scenarios.sh ft_wtime.sh; do
			CHANMEM_TEST_MODE=$mode CHANMEM_CM_THREADS=$n bash "$here/$t" || status=1
		done
	done
done
exit $status
