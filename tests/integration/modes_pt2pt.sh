#!/bin/bash
# The point-to-point suite over the cm transport against every cmserver mode
# (and 1, 2, 4 threads where the mode takes --threads), parameterised through
# CHANMEM_TEST_MODE / CHANMEM_CM_THREADS, not copied. MODES_ONLY="a b" limits
# the modes (the sanitizer runs use it); MODES_THREADS overrides "1 2 4";
# MODES_ROTATE=R runs each case in R of the configurations instead of all
# (the sanitizer runs; see lib.sh's itest_each_mode).
here=$(dirname "$0")
. "$here/lib.sh"
itest_each_mode --rotate "1 2 4" bash "$here/pt2pt_cm.sh"
