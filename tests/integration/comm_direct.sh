#!/bin/bash
# Communicator/datatype/request suite over the direct transport (TCP mesh).
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/comm_suite.sh"
itest_setup
comm_suite "" must-cancel --transport direct
itest_finish
