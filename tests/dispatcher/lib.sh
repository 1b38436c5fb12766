# Shared helpers of the cmrun integration tests (sourced by bash scripts).
# The environment gives $CMRUN, $CMSERVER and $TESTSRC (tests/Makefile.am).
# Every wait here is bounded; every process is stopped by its pid.
#
# Failure semantics are those of integration/lib.sh, whose counters and
# summary this uses: a failing check prints "FAIL: SECTION: why" and the
# script goes on with the next check; `note TEXT` starts the section TEXT
# (checks before the first note form a section named after the script,
# reported only if one of them fails or the script has no note); each
# section without a failure prints "PASS: SECTION". `finish`, the last line
# of every script, prints "N passed, M failed" (sections) and exits 1 if any
# check failed, else 0. Whatever ends a script that has counted a failure
# (exit 0, skip) makes it exit 1. `skip` exits 77 (automake SKIP); setup
# that cannot go on (mktemp, cd) calls itest_hard_error (exit 99, ERROR).

: "${TESTSRC:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$TESTSRC/integration/lib.sh"
HELPERS="$TESTSRC/dispatcher"
# Seconds any single cmrun run may take before the test calls it a hang.
RUN_LIMIT=60

section=${0##*/}
section_failed=0
section_start=$SECONDS
section_is_prelude=1

fail() {
	itest_log "FAIL: $section: $*"
	[ "$section_failed" = 1 ] || itest_failures=$((itest_failures + 1))
	section_failed=1
	return 1
}

skip() {
	echo "SKIP: $*" >&2
	exit 77
}

# end_section [last]: counts the section that ends. The prelude counts if it
# failed or is the whole script (last).
end_section() {
	itest_elapsed=$((SECONDS - section_start))
	[ "$section_failed" = 0 ] || return 0
	[ "$section_is_prelude" = 0 ] || [ "${1:-}" = last ] || return 0
	itest_pass "$section"
}

note() {
	end_section
	section=$*
	section_failed=0
	section_start=$SECONDS
	section_is_prelude=0
	echo "--- $*"
}

finish() {
	end_section last
	itest_finish
	exit
}

[ -n "$CMRUN" ] && [ -x "$CMRUN" ] || skip "cmrun not built (CMRUN='$CMRUN')"

T=$(mktemp -d "${TMPDIR:-/tmp}/cmrun-test.XXXXXX") || itest_hard_error "mktemp"
STARTED_PIDS=""

cleanup() {
	local status=$?
	# Anything a test started and did not reap (a failed check mid-way).
	for p in $STARTED_PIDS; do
		kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
	if [ "$itest_failures" -gt 0 ] && { [ "$status" = 0 ] || [ "$status" = 77 ]; }; then
		exit 1
	fi
}
trap cleanup EXIT

# The real cmserver for transport cm; tests that need it call need_cmserver.
need_cmserver() {
	[ -n "$CMSERVER" ] && [ -x "$CMSERVER" ] || skip "cmserver not built (CMSERVER='$CMSERVER')"
	CHANMEM_CMSERVER=$CMSERVER
	export CHANMEM_CMSERVER
}

# cmrun ARGS... with a hard bound (SIGKILL, so its ranks die with it);
# stdout/stderr to $T/out, $T/err; status in $rc.
run_cmrun() {
	rc=0
	timeout -s KILL "$RUN_LIMIT" "$CMRUN" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
	check_not_hung "$@"
}

check_not_hung() {
	if [ "$rc" -eq 137 ] && ! grep -q "killed by signal SIGKILL" "$T/err"; then
		fail "cmrun hung (killed by the test's $RUN_LIMIT s bound): $*"
	fi
}

expect_status() {
	[ "$rc" -eq "$1" ] || {
		echo "stdout:"; head -20 "$T/out"; echo "stderr:"; head -20 "$T/err"
		fail "expected exit status $1, got $rc ($2)"
	}
}

# refused MESSAGE ARGS...: cmrun ARGS... exits 2 with MESSAGE on stderr and
# starts no cmserver (none recorded in $CM_ARGS_FILE, when the test sets it).
refused() {
	msg=$1
	shift
	run_cmrun "$@"
	expect_status 2 "cmrun $*"
	expect_err "$msg" "cmrun $*"
	[ -z "$CM_ARGS_FILE" ] || [ ! -e "$CM_ARGS_FILE" ] ||
		fail "a cmserver was started for a refused command: $*"
}

expect_err() {
	grep -qF -- "$1" "$T/err" || {
		echo "stderr:"; head -20 "$T/err"
		fail "stderr lacks '$1' ($2)"
	}
}

# "PID STARTTIME" identifies a process even if the pid number is reused.
proc_id() {
	[ -r "/proc/$1/stat" ] || return 1
	sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk -v p="$1" '{ print p, $20 }'
}

# True while the process recorded as "PID STARTTIME" runs (zombies count as
# gone: they no longer run and init reaps them).
proc_alive() {
	stat=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	set -- "$1" "$2" $stat
	[ "$3" != Z ] && [ "$3" != X ] && [ "${22}" = "$2" ]
}

# wait_gone SECONDS FILE: every "PID STARTTIME" line of FILE has stopped.
wait_gone() {
	limit=$(( $1 * 10 ))
	i=0
	while [ "$i" -lt "$limit" ]; do
		alive=""
		while read -r pid start; do
			[ -n "$pid" ] || continue
			proc_alive "$pid" "$start" && alive="$alive $pid"
		done <"$2"
		[ -z "$alive" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	echo "still running:$alive" >&2
	for pid in $alive; do
		ps -o pid,ppid,stat,args -p "$pid" >&2 || true
		kill -KILL "$pid" 2>/dev/null
	done
	return 1
}

# wait_lines SECONDS FILE N: FILE has at least N lines.
wait_lines() {
	limit=$(( $1 * 10 ))
	i=0
	while [ "$i" -lt "$limit" ]; do
		[ -f "$2" ] && [ "$(wc -l <"$2")" -ge "$3" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# Starts cmrun ARGS... in the background (bounded); its pid in $CMRUN_PID.
start_cmrun() {
	timeout -s KILL "$RUN_LIMIT" "$CMRUN" "$@" >"$T/out" 2>"$T/err" </dev/null &
	TIMEOUT_PID=$!
	STARTED_PIDS="$STARTED_PIDS $TIMEOUT_PID"
	# timeout(1) is the parent; cmrun is its only child.
	i=0
	CMRUN_PID=""
	while [ "$i" -lt 50 ] && [ -z "$CMRUN_PID" ]; do
		CMRUN_PID=$(cat "/proc/$TIMEOUT_PID/task/$TIMEOUT_PID/children" 2>/dev/null | awk '{ print $1 }')
		[ -n "$CMRUN_PID" ] || sleep 0.1
		i=$((i + 1))
	done
	[ -n "$CMRUN_PID" ] || fail "cmrun did not start" || return
	STARTED_PIDS="$STARTED_PIDS $CMRUN_PID"
}

# Waits for the background cmrun; its status in $rc.
wait_cmrun() {
	rc=0
	wait "$TIMEOUT_PID" || rc=$?
	check_not_hung
}
