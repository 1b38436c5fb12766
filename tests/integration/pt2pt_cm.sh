#!/bin/bash
# Point-to-point integration suite over the cm transport (every message through
# the destination's channel memory), with 1 CM and with several.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/pt2pt_suite.sh"
pt2pt_suite cm
