#!/usr/bin/env bash
# The main job: installs what is missing, builds, then runs NetPIPE (NPcm)
# over a channel memory and prints the curve's key points.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$top/build}
bash "$top/scripts/setup.sh"
export CMRUN="$BUILD_DIR/dispatcher/cmrun" CMSERVER="$BUILD_DIR/cmserver/cmserver" NPCM="$BUILD_DIR/netpipe/NPcm"
exec bash "$top/netpipe/demo" "$@"
