#!/bin/bash
# check-netpipe.sh: the real NetPIPE (its MPI module, NPmpi) over chanmem's
# fault-tolerant device. Run it with `make check-netpipe` from a build tree,
# which sets CMRUN (dispatcher/cmrun) and CMCC (client/cmcc-uninstalled).
#
# 1. Source. Nothing of NetPIPE is in this repository: the script fetches
#    Debian's source package with `apt-get source --download-only netpipe`,
#    through a private deb-src list (suite = VERSION_CODENAME of
#    /etc/os-release) and private apt state, so the system's apt
#    configuration is neither needed nor touched. Only the upstream tarball
#    (netpipe_3.7.2.orig.tar.gz) is used; its SHA-256 is checked against the
#    .dsc, which apt itself checked against the archive's signed index. Both
#    are cached, so later runs do not download again.
#    Where the source cannot be had (no apt-get, no network, no such
#    package, no archive key) the script prints one "SKIP: ..." line and
#    exits 0. Every other failure (checksum, build, run) exits 1.
# 2. Build. NetPIPE's own makefile, target `mpi`, with MPICC=$CMCC; NetPIPE
#    is never patched. A missing MPI function shows as an undefined
#    reference or an implicit declaration and is reported as chanmem's bug.
# 3. Runs. NPmpi between 2 ranks under cmrun over the cm transport, in every
#    cmserver mode, failure-free, with --kill-every 500ms --kill-count 2
#    --seed N and with --kill-at 0:300ms; NPmpi choosing its own repeat counts from its clock
#    (no -n) with rank 0 killed; then NetPIPE's integrity mode (-i:
#    every received int checked) with kills. A run passes when cmrun exits
#    0, NPmpi's output file lists exactly the message sizes of NetPIPE's
#    size sequence up to -u (so the whole range completed: NetPIPE stops
#    early when a message takes over a second), the injected kills caused
#    restarts, and no process of the run is left behind. Timings are
#    printed, never asserted.
#
# Environment (all optional):
#   NETPIPE_CACHE_DIR  cache of the .dsc and tarball
#                      (default ${XDG_CACHE_HOME:-~/.cache}/chanmem/netpipe,
#                      else tests/netpipe-cache in the build tree)
#   NETPIPE_SUITE      Debian suite to fetch from (default: VERSION_CODENAME)
#   NETPIPE_MIRROR     default http://deb.debian.org/debian
#   NETPIPE_UPPER      NPmpi -u, largest message in bytes (default 4194304)
#   NETPIPE_REPEATS    NPmpi -n, ping-pongs per size and trial (default 5)
#   NETPIPE_TIMED_UPPER  -u of the run without -n (default 32)
#   NETPIPE_KEEP=1     keep the work directory (sources, outputs, logs)
set -u

: "${CMRUN:?CMRUN not set (run through make check-netpipe)}"
: "${CMCC:?CMCC not set (run through make check-netpipe)}"

upper=${NETPIPE_UPPER:-4194304}
repeats=${NETPIPE_REPEATS:-5}
# Without -n NetPIPE spends ~0.75 s per size: the timed run stays small.
timed_upper=${NETPIPE_TIMED_UPPER:-32}
mirror=${NETPIPE_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
job_timeout=60s # cmrun --timeout, per run
outer_timeout=90 # in case cmrun itself hangs

me=check-netpipe

fail() {
	printf '%s: FAIL: %s\n' "$me" "$*" >&2
	exit 1
}

skip() {
	printf 'SKIP: %s: NetPIPE source not available: %s\n' "$me" "$*"
	exit 0
}

is_count() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	return 0
}
is_count "$upper" && [ "$upper" -ge 8 ] && [ "$upper" -le 1000000000 ] ||
	fail "NETPIPE_UPPER must be a byte count from 8 to 1000000000, not '$upper'"
is_count "$repeats" && [ "$repeats" -ge 1 ] && [ "$repeats" -le 100000 ] ||
	fail "NETPIPE_REPEATS must be a count from 1 to 100000, not '$repeats'"
[ -x "$CMRUN" ] || fail "cmrun not found or not executable: $CMRUN"
[ -x "$CMCC" ] || fail "cmcc not found or not executable: $CMCC"

work=$(mktemp -d "${TMPDIR:-/tmp}/check-netpipe.XXXXXX") || fail "mktemp failed"
cleanup() {
	if [ "${NETPIPE_KEEP:-0}" = 1 ]; then
		printf '%s: work directory kept: %s\n' "$me" "$work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- source

pick_cache_dir() {
	local dir
	for dir in ${NETPIPE_CACHE_DIR:+"$NETPIPE_CACHE_DIR"} \
		"${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/chanmem/netpipe" \
		"$PWD/tests/netpipe-cache"; do
		if mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; then
			printf '%s\n' "$dir"
			return 0
		fi
	done
	return 1
}

# dsc_sha256 DSC FILE: the SHA-256 the .dsc lists for FILE (empty if none).
dsc_sha256() {
	awk -v f="$2" '
		/^Checksums-Sha256:/ { in_sums = 1; next }
		/^[^ ]/ { in_sums = 0 }
		in_sums && $3 == f { print $1; exit }' "$1"
}

# verify_tarball DIR TARBALL: 0 when the .dsc next to it lists its SHA-256
# (or there is no .dsc: a tarball put there by hand), 1 otherwise.
verify_tarball() {
	local dir=$1 tarball=$2 dsc want got
	dsc=$(find "$dir" -maxdepth 1 -name 'netpipe_*.dsc' | sort | tail -n 1)
	if [ -z "$dsc" ]; then
		printf '%s: %s: no .dsc next to it, checksum not checked\n' "$me" "$tarball"
		return 0
	fi
	want=$(dsc_sha256 "$dsc" "$(basename "$tarball")")
	got=$(sha256sum "$tarball" | cut -d' ' -f1)
	if [ -z "$want" ]; then
		printf '%s: %s does not list %s\n' "$me" "$dsc" "$(basename "$tarball")" >&2
		return 1
	fi
	if [ "$want" != "$got" ]; then
		printf '%s: %s: SHA-256 %s, the .dsc says %s\n' "$me" "$tarball" "$got" "$want" >&2
		return 1
	fi
	printf '%s: %s: SHA-256 matches %s\n' "$me" "$(basename "$tarball")" "$(basename "$dsc")"
	return 0
}

cached_tarball() {
	find "$cache" -maxdepth 1 -name 'netpipe_*.orig.tar.*' | sort | tail -n 1
}

# Download the .dsc and the orig tarball into the cache; skip() when apt
# cannot get them.
download_source() {
	local suite apt dl log opts
	suite=${NETPIPE_SUITE:-}
	if [ -z "$suite" ] && [ -r /etc/os-release ]; then
		suite=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
	fi
	[ -n "$suite" ] || skip "no VERSION_CODENAME in /etc/os-release (set NETPIPE_SUITE)"
	command -v apt-get >/dev/null || skip "no apt-get on this machine"
	[ -r "$keyring" ] || skip "no Debian archive keyring ($keyring)"

	apt=$work/apt
	dl=$work/download
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dl" ||
		fail "cannot create $apt"
	cat >"$apt/deb-src.sources" <<EOF
Types: deb-src
URIs: $mirror
Suites: $suite
Components: main
Signed-By: $keyring
EOF
	opts=(-q -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::Etc::sourcelist=$apt/deb-src.sources" -o "Dir::State::Lists=$apt/lists"
		-o "Dir::Cache=$apt/cache" -o Acquire::Retries=2 -o Acquire::http::Timeout=30
		-o Acquire::Languages=none)
	# Root would hand the downloads to the _apt user, who cannot write into
	# our private (0700) directories.
	[ "$(id -u)" = 0 ] && opts+=(-o APT::Sandbox::User=root)

	log=$work/apt.log
	printf '%s: fetching netpipe from %s %s (deb-src)\n' "$me" "$mirror" "$suite"
	if ! timeout 180 apt-get "${opts[@]}" update >"$log" 2>&1; then
		skip "apt-get update of $mirror $suite failed: $(grep -E '^(E|Err):' "$log" | head -n 1)"
	fi
	# The Debian part (debian.tar.xz) may be missing from the mirror, which
	# makes apt-get exit non-zero; the upstream tarball alone is enough.
	(cd "$dl" && timeout 180 apt-get "${opts[@]}" source --download-only netpipe) \
		>>"$log" 2>&1
	local tarball dsc
	tarball=$(find "$dl" -maxdepth 1 -name 'netpipe_*.orig.tar.*' | sort | tail -n 1)
	dsc=$(find "$dl" -maxdepth 1 -name 'netpipe_*.dsc' | sort | tail -n 1)
	if [ -z "$tarball" ]; then
		skip "apt-get source netpipe gave no orig tarball: $(grep -E '^(E|Err):' "$log" | head -n 1)"
	fi
	verify_tarball "$dl" "$tarball" || fail "downloaded NetPIPE tarball does not match its .dsc"
	# Into the cache: .dsc first, tarball last, each by an atomic rename, so
	# a cached tarball always has its .dsc.
	rm -f "$cache"/netpipe_*
	if [ -n "$dsc" ]; then
		cp "$dsc" "$cache/.tmp.$$" && mv "$cache/.tmp.$$" "$cache/$(basename "$dsc")" ||
			fail "cannot write to the cache $cache"
	fi
	cp "$tarball" "$cache/.tmp.$$" && mv "$cache/.tmp.$$" "$cache/$(basename "$tarball")" ||
		fail "cannot write to the cache $cache"
}

cache=$(pick_cache_dir) || fail "no writable cache directory (set NETPIPE_CACHE_DIR)"
tarball=$(cached_tarball)
if [ -n "$tarball" ]; then
	printf '%s: using the cached %s\n' "$me" "$tarball"
	if ! verify_tarball "$cache" "$tarball"; then
		printf '%s: discarding the cached copy, downloading again\n' "$me"
		download_source
	fi
else
	download_source
fi
tarball=$(cached_tarball)
[ -n "$tarball" ] || fail "no tarball in the cache $cache after downloading"

# ---------------------------------------------------------------- build

src=$work/src
mkdir -p "$src" && tar -xf "$tarball" -C "$src" || fail "cannot unpack $tarball"
npdir=$(find "$src" -mindepth 2 -maxdepth 3 -name makefile -path '*NetPIPE*' -printf '%h\n' | head -n 1)
[ -n "$npdir" ] && [ -f "$npdir/src/mpi.c" ] || fail "$tarball: no NetPIPE makefile and src/mpi.c"
printf '%s: building NPmpi (NetPIPE %s) with %s\n' "$me" "$(basename "$npdir")" "$CMCC"
# Not the flags of the make running this script (-k, -j, jobserver fds).
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$npdir" mpi MPICC="$CMCC" CFLAGS=-O2 \
	>"$work/build.log" 2>&1; then
	cat "$work/build.log" >&2
	missing=$(grep -oE "(undefined reference to .|implicit declaration of function .)MPI_[A-Za-z_]+" \
		"$work/build.log" | grep -oE 'MPI_[A-Za-z_]+' | sort -u | tr '\n' ' ')
	[ -n "$missing" ] && fail "NPmpi does not build: chanmem lacks ${missing% } (a chanmem bug)"
	fail "NPmpi does not build with cmcc (log above)"
fi
npmpi=$npdir/NPmpi
[ -x "$npmpi" ] || fail "NetPIPE's makefile made no NPmpi"
if grep -q 'warning:.*MPI_' "$work/build.log"; then
	printf '%s: compiler warnings about MPI names:\n' "$me"
	grep 'warning:.*MPI_' "$work/build.log"
fi

# ---------------------------------------------------------------- runs

# expected_sizes START END PERTURBATION: the message sizes NetPIPE's main
# loop (netpipe.c) measures, in order: len from START, its increment
# doubling every other step, each len measured at len-P, len, len+P once the
# increment exceeds P+1; the loop ends past END.
expected_sizes() {
	awk -v start="$1" -v end="$2" -v pert="$3" 'BEGIN {
		inc = start > 1 ? int(start / 2) : 1; nq = start > 1 ? 1 : 0; n = 0
		for (len = start; n < 8000 - 3 && len <= end; len += inc) {
			if (nq > 2 && nq % 2) inc += inc
			if (pert > 0 && inc > pert + 1)
				for (p = -pert; p <= pert; p += pert) { print len + p; n++ }
			else { print len; n++ }
			nq++
		}
	}'
}

expected_sizes 1 "$upper" 3 >"$work/sizes.perf"
expected_sizes 5 "$upper" 0 >"$work/sizes.integrity"
expected_sizes 1 "$timed_upper" 3 >"$work/sizes.timed"

# Pids of live processes of a run: in its session or carrying its marker.
leftovers() {
	local mark=$1 sid=$2 pid state psid
	while read -r pid state psid; do
		case $state in Z*) continue ;; esac
		if [ "$psid" = "$sid" ] ||
			tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qxF "CHANMEM_NETPIPE_MARK=$mark"; then
			printf '%s\n' "$pid"
		fi
	done < <(ps -e -o pid=,stat=,sid=)
}

failures=0
passes=0
summary=()

run_fail() {
	printf '%s: FAIL %s: %s\n' "$me" "$1" "$2"
	printf '  command: %s\n' "$(cat "$work/$1.cmd")"
	printf '  last lines of its stderr:\n'
	tail -n 15 "$work/$1.err" | sed 's/^/    /'
	failures=$((failures + 1))
}

# run_np NAME MODE KIND EXPECT_RESTARTS [cmrun options] -- [NPmpi options]
#   KIND: perf or integrity (NPmpi -i);
#   EXPECT_RESTARTS: none, some (at least one), or rank0 (rank 0 once).
run_np() {
	local name=$1 mode=$2 kind=$3 expect=$4
	shift 4
	local opts=() npopts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	npopts=(-u "$upper" -n "$repeats" "$@")
	# Integrity mode checks every int received and times nothing; more
	# repeats make the run long enough for the kills to land in it.
	[ "$kind" = integrity ] && npopts=(-i -u "$upper" -n "$((repeats * 6))" "$@")
	# NetPIPE's own repeat counts, chosen from its gettimeofday timings
	# (logged by chanmem, so a re-executed rank 0 chooses the same ones).
	[ "$kind" = timed ] && npopts=(-u "$timed_upper" "$@")
	local threads=()
	case $mode in multiplexer | specialized) threads=(CHANMEM_CM_THREADS=2) ;; esac
	local out=$work/$name.np
	local cmd=(env "${threads[@]}" "$CMRUN" -v -n 2 --mode "$mode" --timeout "$job_timeout"
		"${opts[@]}" "$npmpi" "${npopts[@]}" -o "$out")
	printf '%s\n' "${cmd[*]}" >"$work/$name.cmd"
	local mark="$name.$$.$RANDOM$RANDOM" t0 t1 rc sid
	t0=$(date +%s.%N)
	# setsid: the run gets its own session (a background child of a
	# non-interactive shell leads no group, so setsid does not fork and the
	# session id is $!), which finds whatever it leaves behind.
	(cd "$work" && CHANMEM_NETPIPE_MARK=$mark exec setsid -w \
		timeout -k 10 "$outer_timeout" "${cmd[@]}") </dev/null >"$work/$name.out" 2>"$work/$name.err" &
	sid=$!
	wait "$sid"
	rc=$?
	t1=$(date +%s.%N)
	local secs left
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	# cmrun waits for its ranks and CMs before it exits: give stragglers 5 s.
	local deadline=$((SECONDS + 5))
	while :; do
		left=$(leftovers "$mark" "$sid")
		[ -z "$left" ] || [ "$SECONDS" -ge "$deadline" ] && break
		sleep 0.2
	done
	local restarts restarted
	restarts=$(grep -cE '^cmrun: rank [0-9]+ started \(pid [0-9]+, incarnation [1-9]' "$work/$name.err")
	# The ranks restarted, e.g. "0,1" ("-" for none).
	restarted=$(sed -nE 's/^cmrun: rank ([0-9]+) started \(pid [0-9]+, incarnation [1-9].*/\1/p' \
		"$work/$name.err" | sort -nu | paste -sd, -)
	restarted=${restarted:--}
	if [ -n "$left" ]; then
		local pid listing
		listing=$(ps -o pid=,ppid=,stat=,args= -p "$(printf '%s\n' "$left" | paste -sd, -)")
		for pid in $left; do kill -KILL "$pid" 2>/dev/null; done
		run_fail "$name" "processes left behind (killed):"
		printf '%s\n' "$listing" | sed 's/^/    /'
		return
	fi
	if [ "$rc" -ne 0 ]; then
		run_fail "$name" "exit status $rc after ${secs}s"
		return
	fi
	if grep -q 'Integrity check failed' "$work/$name.err"; then
		run_fail "$name" "NetPIPE's integrity check failed: $(grep -m1 'Integrity check failed' "$work/$name.err")"
		return
	fi
	if [ ! -s "$out" ]; then
		run_fail "$name" "NPmpi wrote no output file"
		return
	fi
	if ! awk '{ print $1 }' "$out" | cmp -s - "$work/sizes.$kind"; then
		run_fail "$name" "sizes measured ($(wc -l <"$out") lines, last $(tail -n 1 "$out" | awk '{ print $1 }')) differ from NetPIPE's sequence up to $upper ($(wc -l <"$work/sizes.$kind") sizes, last $(tail -n 1 "$work/sizes.$kind"))"
		return
	fi
	case $expect in
	none) [ "$restarts" -eq 0 ] || {
		run_fail "$name" "$restarts restarts in a run without kills"
		return
	} ;;
	some) [ "$restarts" -ge 1 ] || {
		run_fail "$name" "no rank was restarted: the kills did not land (the run took ${secs}s)"
		return
	} ;;
	rank0)
		local r0
		r0=$(grep -cE '^cmrun: rank 0 started \(pid [0-9]+, incarnation 1,' "$work/$name.err")
		[ "$restarts" -eq 1 ] && [ "$r0" -eq 1 ] || {
			run_fail "$name" "expected rank 0 restarted once, saw $restarts restarts"
			return
		}
		;;
	esac
	local last mbps peak
	last=$(tail -n 1 "$out" | awk '{ print $1 }')
	if [ "$kind" != integrity ]; then
		mbps=$(tail -n 1 "$out" | awk '{ printf "%.0f", $2 }')
		peak=$(awk '$2 > m { m = $2 } END { printf "%.0f", m }' "$out")
	else
		mbps=- peak=-
	fi
	summary+=("$(printf '%-28s %-17s %-9s %8s %5s %5s %9s %9s %9s' "$name" "$mode" "$kind" \
		"$restarts" "$restarted" "$secs" "$last" "$mbps" "$peak")")
	printf '%s: PASS %s (%ss, %s restarts, last size %s)\n' "$me" "$name" "$secs" "$restarts" "$last"
	passes=$((passes + 1))
}

printf '%s: NPmpi -u %s -n %s: %s sizes per run (last %s), cmrun -n 2 over cm\n' "$me" "$upper" \
	"$repeats" "$(wc -l <"$work/sizes.perf")" "$(tail -n 1 "$work/sizes.perf")"
modes="mono thread-per-client multiplexer specialized"
seed=0
for mode in $modes; do
	run_np "plain_$mode" "$mode" perf none --
done
for mode in $modes; do
	seed=$((seed + 1))
	run_np "kill_every_$mode" "$mode" perf some --kill-every 500ms --kill-count 2 --seed "$seed" --
	run_np "kill_at_$mode" "$mode" perf rank0 --kill-at 0:300ms --
done
# Rank 0 killed mid-run while NetPIPE picks its repeat counts from the clock.
run_np timed_kill_at_mono mono timed rank0 --kill-at 0:2500ms --
run_np integrity_kill_mono mono integrity some --kill-every 400ms --kill-count 2 --seed 7 --
run_np integrity_kill_specialized specialized integrity some --kill-every 400ms --kill-count 2 \
	--seed 8 --

# NetPIPE times with gettimeofday, which chanmem logs like MPI_Wtime: a
# restarted rank 0 re-reads the dead incarnation's times while it is
# replayed, then measures again; the rates of runs with rank 0 among the
# restarted ranks mix both.
printf '\n%-28s %-17s %-9s %8s %5s %5s %9s %9s %9s\n' run mode kind restarts ranks secs \
	last_size Mbps@last peak_Mbps
for line in "${summary[@]}"; do
	printf '%s\n' "$line"
done
printf '%s: %d passed, %d failed\n' "$me" "$passes" "$failures"
[ "$failures" -eq 0 ]
