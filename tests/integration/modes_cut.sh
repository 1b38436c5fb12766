#!/bin/bash
# unit/test_core_cut_live against every mode (1 and 4 threads where the mode
# takes --threads): cut-through forwarding in the real cmserver -- a large
# message reaches the receiver while it is still arriving, not with
# --cut-through-min 0, and a sender that dies mid-payload is resumed by its
# re-send. MODES_ONLY / MODES_THREADS as in lib.sh's itest_each_mode.
here=$(dirname "$0")
. "$here/lib.sh"
live=${LIVE_TEST:-./unit/test_core_cut_live}
CK_FORK=yes itest_each_mode "1 4" "$live"
