#!/usr/bin/env bash
# Installs the Debian packages chanmem needs (only those missing), then
# configures and builds the tree in $BUILD_DIR (default: build/ at the top).
# Sourced by demo.sh and test.sh; safe to run again (does only what is needed).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$top/build}
CONFIGURE_FLAGS=${CONFIGURE_FLAGS:---enable-werror}

packages=(build-essential autoconf automake libtool pkg-config
	libev-dev liblmdb-dev libzstd-dev check gnuplot-nox netpipe-tcp procps
	iproute2 openssh-server man-db groff-base clang libclang-rt-dev strace)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: need root to install packages (run as root or install: ${missing[*]})" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
	echo "setup: autoreconf"
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
	echo "setup: configure $CONFIGURE_FLAGS (in $BUILD_DIR)"
	"$top/configure" -q $CONFIGURE_FLAGS
fi
echo "setup: make"
make -s -j"$(nproc)" >/dev/null
echo "setup: built in $BUILD_DIR"
