#!/usr/bin/env bash
# Runs the whole chanmem test suite: installs what is missing, builds, then
# `make check` (unit tests + integration tests with real processes on
# loopback), the same suite again built with AddressSanitizer+UBSan, and the
# channel-memory tests of the threaded cmserver modes built with
# ThreadSanitizer (any report fails the run). Ends with one line:
# "N passed, N failed".
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
total_pass=0
total_fail=0

# The longest tests of the plain and ASan suites (some minutes between
# them), started first: make -j starts TESTS in their order, and a long
# test started last would run alone at the end.
long_first="integration/ft_coll.sh integration/rank_retain_bound.sh fuzz/run.sh
	integration/ft_cm_standby.sh integration/ft_cm_death.sh integration/modes_pt2pt.sh
	integration/cm_log_bound.sh integration/bigmsg.sh integration/ft_modes.sh
	netns/netns_partition.sh integration/coll_switch.sh unit/test_cm_reconnect
	unit/test_harden_live integration/ft_cm_hello_race.sh integration/intercomm.sh"

run_suite() { # $1 = label, $2 = build dir, $3 = configure flags, [$4 = tests to run, in order]
	local label=$1
	BUILD_DIR=$2 CONFIGURE_FLAGS=$3 bash "$top/scripts/setup.sh" || {
		echo "test: $label build failed"
		total_fail=$((total_fail + 1))
		return
	}
	echo "test: $label suite"
	local status=0 tests=${4:-} all t smoke=()
	if [ -z "$tests" ]; then
		# The whole list: what make check runs beside it too.
		smoke=(NETPIPE_SMOKE=1)
		all=" $(make -s --no-print-directory -C "$2/tests" print-tests) "
		if [ -z "${all// /}" ]; then
			echo "test: $label: no test list (make print-tests)"
			total_fail=$((total_fail + 1))
			return
		fi
		for t in $long_first; do
			[[ $all == *" $t "* ]] && tests+=" $t" && all=${all/ $t / }
		done
		tests+=$all
	fi
	make -C "$2" -s -j"${SUITE_JOBS:-$(nproc)}" check TESTS="$(echo $tests)" "${smoke[@]}" \
		>"$2/check.out" 2>&1 || status=$?
	grep -E '^(PASS|FAIL|XFAIL|XPASS|ERROR|SKIP):' "$2/check.out" | sed "s/^/  [$label] /"
	local pass fail
	pass=$(grep -cE '^(PASS|XFAIL):' "$2/check.out")
	fail=$(grep -cE '^(FAIL|XPASS|ERROR):' "$2/check.out")
	if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then
		fail=1 # make itself failed (build error in a test program)
		tail -40 "$2/check.out"
	fi
	if [ "$fail" -ne 0 ]; then
		# Show what failed, from the per-test logs.
		for log in $(grep -lE '^:test-result: (FAIL|ERROR|XPASS)' $(find "$2/tests" -name '*.trs') 2>/dev/null); do
			echo "---- ${log%.trs}.log"
			tail -60 "${log%.trs}.log"
		done
	fi
	total_pass=$((total_pass + pass))
	total_fail=$((total_fail + fail))
}

# The plain and ASan suites run one test more than there are cores: most
# of their tests spend their time waiting (kill schedules, sleeping ranks,
# restarts), not computing.
SUITE_JOBS=$(($(nproc) + 1)) run_suite plain "${BUILD_DIR:-$top/build}" "--enable-werror"

# The emulated cluster (tests/netns: cmrun across network-namespace hosts, node crash,
# partition) ran inside the suite above (and runs again under ASan below); it needs root.
# Say plainly whether it ran: a SKIP is counted as neither pass nor fail.
netns_logs=$(ls "${BUILD_DIR:-$top/build}"/tests/netns/*.log 2>/dev/null)
if [ -z "$netns_logs" ]; then
	echo "test: netns: no results (tests/netns not run)"
elif grep -q '^SKIP: emulated cluster unavailable\|^SKIP: this cmrun' $netns_logs; then
	echo "test: netns: SKIPPED, $(grep -h '^SKIP: ' $netns_logs | head -n 1 | sed 's/^SKIP: //')"
else
	echo "test: netns: emulated cluster tests ran ($(grep -ch '^PASS: ' $netns_logs |
		awk '{s += $1} END {print s}') checks passed, see the [plain] lines above)"
fi

# Real NetPIPE (Debian's source package, fetched at test time) built with
# cmcc and run over every cmserver mode, with kills. Without the source
# (no mirror) it says SKIP and counts nothing.
if [ "${CHANMEM_SKIP_NETPIPE:-0}" != 1 ]; then
	nb=${BUILD_DIR:-$top/build}
	echo "test: netpipe (real NetPIPE, Debian source)"
	if make -C "$nb" -s check-netpipe >"$nb/netpipe.out" 2>&1; then
		if grep -q '^SKIP:' "$nb/netpipe.out"; then
			grep '^SKIP:' "$nb/netpipe.out" | sed 's/^/  [netpipe] /'
		else
			echo "  [netpipe] PASS: check-netpipe"
			total_pass=$((total_pass + 1))
		fi
	else
		tail -60 "$nb/netpipe.out"
		echo "  [netpipe] FAIL: check-netpipe"
		total_fail=$((total_fail + 1))
	fi
fi
if [ "${CHANMEM_SKIP_ASAN:-0}" != 1 ]; then
	# The fuzz targets build with their own sanitizers: the plain suite ran them.
	# Channel memories' deaths: the cases that take every recovery path (a
	# CM killed during a rank's replay, with a checkpoint, with its rank);
	# the plain suite runs them all. The suites over every cmserver mode run
	# each case in two of the engine configurations (MODES_ROTATE): what
	# AddressSanitizer finds comes from the code paths taken, and the plain
	# suite runs every case in every configuration. Collectives under
	# faults: half the iterations (the first kill comes within 0.6 s).
	FUZZ_SECONDS=0 CM_DEATH_CASES="master stencil_during_replay stencil_with_rank ck2m npcm" \
		FT_COLL_KINDS="kill cm" FT_COLL_ITERS_SMALL=750 FT_COLL_ITERS_BIG=20 \
		MODES_ROTATE=2 SUITE_JOBS=$(($(nproc) + 1)) \
		run_suite asan "$top/build-asan" "--enable-werror --enable-sanitizers=address"
fi

if [ "${CHANMEM_SKIP_TSAN:-0}" != 1 ]; then
	# The threaded engines (thread-per-client, multiplexer, specialized with 1
	# and 4 threads) under ThreadSanitizer: the core's tests, the live checks,
	# the 64-rank stress, the point-to-point suite, and the fault-tolerance
	# scenarios (kills, restarts, replay), channel memories killed and
	# recovered from their journals, and the ranks' send flusher thread.
	# Every case of the point-to-point and fault-tolerance suites runs in
	# every threaded mode, with one of the thread counts (MODES_ROTATE).
	# Channel memories' deaths, with and without standbys: the
	# master/worker and the checkpointed 2 MiB ring (the plain build runs
	# every case; the ring shorter, its kills land in its first seconds);
	# the standby's stream and takeover; the log memory's
	# admission raced by threads, and the spill store's writer thread;
	# collectives' pushed messages under CM deaths with standbys (fewer
	# iterations: ThreadSanitizer slows them about twentyfold).
	# The longest first (see long_first).
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" CM_DEATH_CASES="master ck2m" CM_DEATH_CK2M_STEPS=100 \
		FT_COLL_KINDS=sb FT_COLL_ITERS_SMALL=150 FT_COLL_ITERS_BIG=6 \
		MODES_ONLY="thread-per-client multiplexer specialized" MODES_THREADS="1 4" MODES_ROTATE=threads \
		run_suite tsan "$top/build-tsan" "--enable-werror --enable-sanitizers=thread" \
		"integration/ft_cm_standby.sh integration/ft_cm_death.sh integration/modes_pt2pt.sh integration/ft_modes.sh integration/ft_spill.sh integration/ft_coll.sh integration/modes_stress.sh integration/modes_live.sh unit/test_core_stream integration/cm_standby.sh integration/modes_cut.sh integration/coalesce.sh unit/test_core unit/test_core_match unit/test_core_ft unit/test_core_ft_log unit/test_core_cut unit/test_logmem unit/test_spill_store unit/test_core_push unit/test_core_journal"
fi

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
