#!/bin/bash
# Communicator/datatype/request suite over the cm transport: one channel
# memory, then three (a sender's clock reaches each CM with gaps, and the
# ranks of a sub-communicator have different home CMs).
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/comm_suite.sh"
itest_setup
comm_suite _cm1 may-complete --transport cm --cms 1
comm_suite _cm3 may-complete --transport cm --cms 3
itest_finish
