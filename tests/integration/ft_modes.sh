#!/bin/bash
# The fault-tolerance scenarios (ft_scenarios.sh) and the clock-replay tests
# (ft_wtime.sh) against every cmserver mode, parameterised through
# CHANMEM_TEST_MODE / CHANMEM_CM_THREADS. MODES_ONLY="a b" limits the modes;
# MODES_THREADS overrides the thread counts ("1 4": one loop, and more loops
# than this machine's cores); MODES_ROTATE=R runs each scenario in R of the
# configurations instead of all (the sanitizer runs). See lib.sh's
# itest_each_mode.
here=$(dirname "$0")
. "$here/lib.sh"

# Both scripts in the mode itest_each_mode sets; fails if either did.
ft_scripts() {
	local script status=0
	for script in ft_scenarios.sh ft_wtime.sh; do
		bash "$here/$script" || status=1
	done
	return $status
}

itest_each_mode --rotate "1 4" ft_scripts
