#!/bin/bash
# Point-to-point integration suite over the direct transport (TCP mesh, no CM).
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/pt2pt_suite.sh"
pt2pt_suite direct
