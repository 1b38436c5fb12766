#!/bin/bash
# The point-to-point suite over the cm transport against every cmserver mode
# (and 1, 2, 4 threads where the mode takes --threads), parameterised through
# CHANMEM_TEST_MODE / CHANMEM_CM_THREADS, not copied. MODES_ONLY="a b" limits
# the modes (the sanitizer runs use it); MODES_THREADS overrides "1 2 4".
here=$(dirname "$0")
status=0
for mode in ${MODES_ONLY:-mono thread-per-client multiplexer specialized}; do
	case $mode in
	multiplexer | specialized) counts=${MODES_THREADS:-1 2 4} ;;
	*) counts=1 ;;
	esac
	for n in $counts; do
		echo "=== mode $mode, threads $n"
		CHANMEM_TEST_MODE=$mode CHANMEM_CM_THREADS=$n bash "$here/pt2pt_cm.sh" || status=1
	done
done
exit $status
