#!/bin/bash
# unit/test_engines_live against every mode (1, 2, 4 threads where the mode
# takes --threads): refusals, a stalled reader, SIGTERM, replaced
# incarnations. MODES_ONLY / MODES_THREADS as in lib.sh's itest_each_mode.
here=$(dirname "$0")
. "$here/lib.sh"
live=${LIVE_TEST:-./unit/test_engines_live}
CK_FORK=yes itest_each_mode "1 2 4" "$live"
