# Helpers for integration scripts that run MPI programs under cmrun.
# Source it from bash; it reads what `make check` exports (AM_TESTS_ENVIRONMENT):
#   CMRUN    cmrun to test              PROGDIR  built test programs
#   TESTSRC  tests/ source directory    (expected outputs live in $TESTSRC/integration)
# Optional:
#   ITEST_LAUNCHER=ompi   run the programs under Open MPI's mpirun instead of cmrun
#                         (proves the programs and expected outputs right; exit codes of
#                         fatal errors and stderr texts are then implementation-specific
#                         and only checked loosely)
#   ITEST_ONLY="a b"      run only the jobs with these names
#   ITEST_KEEP=1          keep the work directory (outputs of every job) for inspection
#   ITEST_STDIN=FILE      the job's stdin (default /dev/null)
#   CHANMEM_TEST_MODE=M   add --mode M to every cmrun job over the cm transport (jobs that
#                         choose a mode or --transport direct are left alone); the thread
#                         count of multiplexer/specialized comes from CHANMEM_CM_THREADS,
#                         which cmrun hands on to cmserver
#
# Failure semantics (dispatcher/lib.sh has the same): a check that fails prints
# "FAIL: NAME: why" (itest_fail) and counts; the script goes on with the next check.
# itest_finish prints "N passed, M failed" and returns non-zero if any check failed;
# the script exits with that. A test that cannot run at all calls itest_hard_error
# (exit 99, an automake ERROR).
#
# Every job runs in its own session with a unique marker in its environment, so after
# it ends every process it left behind is found (by marker or by session), reported as
# a failure and killed by pid. Nothing else on the machine is touched.

ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-120s} # cmrun --timeout
ITEST_OUTER_TIMEOUT=180                      # safety net in case cmrun itself hangs
ITEST_LAUNCHER=${ITEST_LAUNCHER:-cmrun}
itest_failures=0
itest_passes=0
itest_work=

itest_log() {
	printf '%s\n' "$*"
}

itest_hard_error() {
	printf 'ERROR: %s\n' "$*" >&2
	exit 99 # automake: hard error
}

itest_cleanup() {
	if [ -n "$itest_work" ] && [ -d "$itest_work" ]; then
		if [ "${ITEST_KEEP:-0}" = 1 ]; then
			itest_log "outputs kept in $itest_work"
		else
			rm -rf "$itest_work"
		fi
	fi
}

# itest_setup: check the environment, create the work directory.
itest_setup() {
	: "${PROGDIR:?PROGDIR not set (run through make check)}"
	: "${TESTSRC:?TESTSRC not set (run through make check)}"
	ITEST_EXPECTED_DIR="$TESTSRC/integration"
	case "$ITEST_LAUNCHER" in
	cmrun)
		: "${CMRUN:?CMRUN not set (run through make check)}"
		[ -x "$CMRUN" ] || itest_hard_error "cmrun not found or not executable: $CMRUN"
		;;
	ompi)
		command -v mpirun >/dev/null || itest_hard_error "ITEST_LAUNCHER=ompi but no mpirun"
		;;
	*) itest_hard_error "ITEST_LAUNCHER must be cmrun or ompi, not '$ITEST_LAUNCHER'" ;;
	esac
	itest_work=$(mktemp -d "${TMPDIR:-/tmp}/itest.XXXXXX") || itest_hard_error "mktemp failed"
	trap itest_cleanup EXIT
	trap 'exit 130' INT TERM
}

itest_selected() {
	if [ -n "${ITEST_ROTATE_SLOTS:-}" ]; then
		itest_rotated "$1" "$ITEST_ROTATE_SLOT" "$ITEST_ROTATE_SLOTS" "$ITEST_ROTATE_R" ||
			return 1
	fi
	[ -z "${ITEST_ONLY:-}" ] && return 0
	local want
	for want in $ITEST_ONLY; do
		[ "$want" = "$1" ] && return 0
	done
	return 1
}

# itest_rotated CASE SLOT SLOTS R: true when configuration SLOT (0 ..
# SLOTS-1) is one of the R (0 < R < SLOTS) that run CASE; else always true.
# Cases are numbered in the order they are first asked about, which must
# not depend on the answers (it must be the same in every configuration:
# ask about every case, not until one is selected), and case N runs in
# slots N, N + SLOTS/R, ... (mod SLOTS): every case runs R times, each
# configuration runs R of every SLOTS consecutive cases, and a case's R
# configurations are spread over the list, not next to each other.
declare -gA itest_rotation=()
itest_rotation_next=0
itest_rotated() {
	local slot=$2 slots=$3 r=$4 n j
	[[ $r =~ ^[0-9]+$ ]] && [ "$r" -gt 0 ] && [ "$r" -lt "$slots" ] || return 0
	n=${itest_rotation[$1]:-}
	if [ -z "$n" ]; then
		n=$itest_rotation_next
		itest_rotation[$1]=$n
		itest_rotation_next=$((n + 1))
	fi
	for ((j = 0; j < r; j++)); do
		[ $(((n + j * (slots / r)) % slots)) -eq "$slot" ] && return 0
	done
	return 1
}

# Pids of live (non-zombie) processes carrying the job's marker or in its session.
itest_leftovers() {
	local mark=$1 sid=$2 pid state psid marked
	# One grep over every environment: a fork per process was most of a
	# job's cost on a busy machine.
	marked=" $(grep -lzxF "CHANMEM_ITEST_MARK=$mark" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3 | tr '\n' ' ') "
	while read -r pid state psid; do
		case "$state" in Z*) continue ;; esac
		if [ "$psid" = "$sid" ] || [[ $marked == *" $pid "* ]]; then
			printf '%s\n' "$pid"
		fi
	done < <(ps -e -o pid=,stat=,sid=)
}

# After a job: wait (bounded) for its processes to go; report and kill stragglers.
itest_check_leftovers() {
	local name=$1 mark=$2 sid=$3 left pid i
	for i in $(seq 1 50); do
		left=$(itest_leftovers "$mark" "$sid")
		[ -z "$left" ] && return 0
		sleep 0.2
	done
	itest_log "  leftover processes after $name:"
	for pid in $left; do
		ps -o pid=,ppid=,stat=,args= -p "$pid" | sed 's/^/    /'
	done
	for pid in $left; do
		kill -KILL "$pid" 2>/dev/null
	done
	return 1
}

# itest_has_word WORD ARGS...: WORD is one of ARGS.
itest_has_word() {
	local want=$1 a
	shift
	for a in "$@"; do
		[ "$a" = "$want" ] && return 0
	done
	return 1
}

# itest_run NAME NRANKS [LAUNCHER OPTIONS...] -- PROGRAM [ARGS...]
# Runs one job; leaves $itest_work/NAME.out, NAME.err and sets itest_rc.
# Returns non-zero if processes were left behind.
itest_run() {
	local name=$1 nranks=$2
	shift 2
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	[ "${1:-}" = -- ] || itest_hard_error "itest_run $name: missing -- before the program"
	shift
	local prog=$1
	shift
	local cmd
	if [ "$ITEST_LAUNCHER" = ompi ]; then
		cmd=(mpirun --allow-run-as-root --oversubscribe -np "$nranks" "$PROGDIR/$prog" "$@")
	else
		if [ -n "${CHANMEM_TEST_MODE:-}" ] && ! itest_has_word --mode "${opts[@]}" &&
			! itest_has_word direct "${opts[@]}"; then
			opts+=(--mode "$CHANMEM_TEST_MODE")
		fi
		cmd=("$CMRUN" -n "$nranks" "${opts[@]}" --timeout "$ITEST_JOB_TIMEOUT"
			"$PROGDIR/$prog" "$@")
	fi
	printf '%s\n' "${cmd[*]}" >"$itest_work/$name.cmd"
	local mark="$name.$$.$RANDOM$RANDOM"
	local start=$SECONDS
	# setsid: the job gets its own session (our background child is no group
	# leader, so setsid does not fork and the session id is $!).
	CHANMEM_ITEST_MARK=$mark setsid -w timeout -k 10 "$ITEST_OUTER_TIMEOUT" "${cmd[@]}" \
		<"${ITEST_STDIN:-/dev/null}" >"$itest_work/$name.out" 2>"$itest_work/$name.err" &
	local sid=$!
	wait "$sid"
	itest_rc=$?
	itest_elapsed=$((SECONDS - start))
	itest_split_report "$name"
	itest_check_leftovers "$name" "$mark" "$sid"
}

# The fault report cmrun prints last after a run with faults goes to
# NAME.report, so that NAME.err holds what else the run said.
itest_split_report() {
	local err="$itest_work/$1.err"
	grep -q '^cmrun: fault report: ' "$err" 2>/dev/null || {
		: >"$itest_work/$1.report"
		return 0
	}
	awk -v rep="$itest_work/$1.report" '/^cmrun: fault report: /{r=1} r{print >rep; next} {print}' \
		"$err" >"$err.rest" && mv "$err.rest" "$err"
}

itest_fail() {
	local name=$1
	shift
	itest_failures=$((itest_failures + 1))
	itest_log "FAIL: $name: $*"
	itest_log "  command: $(cat "$itest_work/$name.cmd")"
	if [ -s "$itest_work/$name.err" ]; then
		itest_log "  stderr (last 20 lines):"
		tail -n 20 "$itest_work/$name.err" | sed 's/^/    /'
	fi
}

# itest_bad_usage NAME NP PATTERN [cmrun options] -- PROGRAM ARGS: cmrun must
# refuse the options, with exit status 2 and PATTERN (ERE) on stderr.
itest_bad_usage() {
	local name=$1 np=$2 pattern=$3
	shift 3
	itest_selected "$name" || return 0
	itest_run "$name" "$np" "$@"
	if [ "$itest_rc" -ne 2 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 2"
	elif ! grep -qE -- "$pattern" "$itest_work/$name.err"; then
		itest_fail "$name" "stderr lacks /$pattern/"
	else
		itest_pass "$name"
	fi
}

# itest_print_map NAME EXPECTED PROGRAM cmrun-options...: cmrun --print-map
# exits 0, prints exactly the file EXPECTED and nothing on stderr (nothing
# is started).
itest_print_map() {
	local name=$1 expected=$2 prog=$3
	shift 3
	itest_selected "$name" || return 0
	itest_elapsed=0
	"$CMRUN" "$@" --print-map -- "$prog" >"$itest_work/$name.out" 2>"$itest_work/$name.err"
	local rc=$?
	echo "$CMRUN $* --print-map -- $prog" >"$itest_work/$name.cmd"
	if [ "$rc" -ne 0 ]; then
		itest_fail "$name" "exit status $rc, expected 0"
	elif ! diff -u "$expected" "$itest_work/$name.out" >"$itest_work/$name.diff"; then
		itest_fail "$name" "map differs:"
		sed 's/^/    /' "$itest_work/$name.diff"
	elif [ -s "$itest_work/$name.err" ]; then
		itest_fail "$name" "unexpected output on stderr"
	else
		itest_pass "$name"
	fi
}

# itest_refused NAME PATTERN PROGRAM cmrun-options...: cmrun refuses the
# options before starting anything: exit 2, PATTERN (ERE) on stderr,
# nothing on stdout.
itest_refused() {
	local name=$1 pattern=$2 prog=$3
	shift 3
	itest_selected "$name" || return 0
	itest_elapsed=0
	"$CMRUN" "$@" -- "$prog" >"$itest_work/$name.out" 2>"$itest_work/$name.err"
	local rc=$?
	echo "$CMRUN $* -- $prog" >"$itest_work/$name.cmd"
	if [ "$rc" -ne 2 ]; then
		itest_fail "$name" "exit status $rc, expected 2"
	elif ! grep -qE -- "$pattern" "$itest_work/$name.err"; then
		itest_fail "$name" "stderr lacks /$pattern/"
	elif [ -s "$itest_work/$name.out" ]; then
		itest_fail "$name" "unexpected stdout"
	else
		itest_pass "$name"
	fi
}

itest_pass() {
	itest_passes=$((itest_passes + 1))
	itest_log "PASS: $1 (${itest_elapsed}s)"
}

# itest_expect_success NAME EXPECTED NRANKS [OPTIONS...] -- PROGRAM [ARGS...]
# Exit status 0, stdout exactly $TESTSRC/integration/EXPECTED.expected, stderr empty,
# no process left behind.
itest_expect_success() {
	local name=$1 expected=$2
	shift 2
	itest_selected "$name" || return 0
	local clean=0
	itest_run "$name" "$@" || clean=1
	local exp="$ITEST_EXPECTED_DIR/$expected.expected"
	[ -f "$exp" ] || itest_hard_error "missing expected output $exp"
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! diff -u "$exp" "$itest_work/$name.out" >"$itest_work/$name.diff"; then
		itest_fail "$name" "stdout differs from $expected.expected:"
		head -n 40 "$itest_work/$name.diff" | sed 's/^/    /'
	elif [ "$ITEST_LAUNCHER" = cmrun ] && [ -s "$itest_work/$name.err" ]; then
		itest_fail "$name" "unexpected output on stderr"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

# itest_expect_failure NAME STATUS STDERR_PATTERN NRANKS [OPTIONS...] -- PROGRAM [ARGS...]
# Exit status STATUS, nothing on stdout, stderr with a line matching the extended
# regular expression STDERR_PATTERN (case-insensitive), no process left behind.
# Under ITEST_LAUNCHER=ompi only "non-zero" is checked unless STATUS is an MPI_Abort
# code (then it must match too) and stderr is not checked.
itest_expect_failure() {
	local name=$1 status=$2 pattern=$3
	shift 3
	itest_selected "$name" || return 0
	local clean=0
	itest_run "$name" "$@" || clean=1
	local status_ok=1
	if [ "$ITEST_LAUNCHER" = ompi ] && [ "$status" = 1 ]; then
		[ "$itest_rc" -ne 0 ] || status_ok=0
	else
		[ "$itest_rc" -eq "$status" ] || status_ok=0
	fi
	if [ "$status_ok" -ne 1 ]; then
		itest_fail "$name" "exit status $itest_rc, expected $status"
	elif [ -s "$itest_work/$name.out" ]; then
		itest_fail "$name" "unexpected stdout: $(head -c 300 "$itest_work/$name.out")"
	elif [ "$ITEST_LAUNCHER" = cmrun ] && ! grep -qiE -- "$pattern" "$itest_work/$name.err"; then
		itest_fail "$name" "stderr lacks /$pattern/"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

# itest_finish: summary line and the script's exit status.
itest_finish() {
	itest_log "$itest_passes passed, $itest_failures failed"
	[ "$itest_failures" -eq 0 ]
}

# itest_each_mode [--rotate] THREADS COMMAND [ARGS...]: runs COMMAND once for every
# cmserver mode and thread count, after a line "=== mode M, threads N", with
# CHANMEM_TEST_MODE=M and CHANMEM_CM_THREADS=N in its environment. The modes that
# take --threads (multiplexer, specialized) run with each count of THREADS ("1 2 4"),
# the others with 1. MODES_ONLY="a b" limits the modes, MODES_THREADS="1 4" replaces
# THREADS (the sanitizer runs of scripts/test.sh set both).
# With --rotate, MODES_ROTATE (the sanitizer runs) spreads the cases (the names
# itest_selected is asked about) over the configurations instead of running each
# in all of them (see itest_rotated):
#   MODES_ROTATE=threads  each case in every mode, with one of its thread counts
#                         (ThreadSanitizer: every engine sees every case)
#   MODES_ROTATE=R        each case in R configurations (AddressSanitizer: the
#                         code paths, not their repetition in every engine)
# Returns 1 if any run failed.
itest_each_mode() {
	local rotate=
	if [ "$1" = --rotate ]; then
		rotate=${MODES_ROTATE:-}
		shift
	fi
	local default_threads=$1
	shift
	local mode threads counts status=0 configs=() c slot=0 mi=0 ti
	for mode in ${MODES_ONLY:-mono thread-per-client multiplexer specialized}; do
		case $mode in
		multiplexer | specialized) counts=${MODES_THREADS:-$default_threads} ;;
		*) counts=1 ;;
		esac
		ti=0
		for threads in $counts; do
			configs+=("$mode $threads $mi $ti $(wc -w <<<"$counts")")
			ti=$((ti + 1))
		done
		mi=$((mi + 1))
	done
	for c in "${configs[@]}"; do
		read -r mode threads mi ti counts <<<"$c"
		echo "=== mode $mode, threads $threads"
		case $rotate in
		threads)
			# Within the mode; shifted by the mode's place, so that a
			# case does not run with the same count in every mode.
			ITEST_ROTATE_SLOT=$(((ti + mi) % counts)) ITEST_ROTATE_SLOTS=$counts ITEST_ROTATE_R=1 \
				CHANMEM_TEST_MODE=$mode CHANMEM_CM_THREADS=$threads "$@" || status=1
			;;
		'')
			CHANMEM_TEST_MODE=$mode CHANMEM_CM_THREADS=$threads "$@" || status=1
			;;
		*)
			ITEST_ROTATE_SLOT=$slot ITEST_ROTATE_SLOTS=${#configs[@]} ITEST_ROTATE_R=$rotate \
				CHANMEM_TEST_MODE=$mode CHANMEM_CM_THREADS=$threads "$@" || status=1
			;;
		esac
		slot=$((slot + 1))
	done
	return $status
}
