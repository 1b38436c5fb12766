#!/bin/bash
# A channel memory's memory stays within its log budget: programs/bidir_window
# (two ranks, 64 sends and 64 receives in flight each way, 1 B .. 4 MiB, about
# 4 GiB through the CM) runs through one CM with --log-mem 512MiB and the spill
# store on (cmserver's default), in every mode. The CM's peak resident memory
# (VmHWM) must stay within 1 GiB, the job must end with status 0 and the
# program's summary, and the CM must leave nothing in its $TMPDIR (a fresh
# directory of this test's).
#
# Safety: cmrun runs under --timeout, and a CM whose peak passes 3 GiB is
# killed by its pid at once (the job then fails), so a CM without the bound
# cannot take the machine's memory.
#
#   make -C build check TESTS=integration/cm_log_bound.sh
#   MODES_ONLY="mono specialized" CM_LOG_BOUND_ITERS=8 ...   (fewer modes, more data)
set -u

: "${CMRUN:?CMRUN not set (run through make check)}"
: "${CMSERVER:?CMSERVER not set (run through make check)}"
: "${PROGDIR:?PROGDIR not set (run through make check)}"
prog=$PROGDIR/bidir_window
[ -x "$CMRUN" ] && [ -x "$CMSERVER" ] && [ -x "$prog" ] || {
	echo "ERROR: cmrun, cmserver or $prog not built" >&2
	exit 99
}
# Sanitizers add shadow memory to every page: the resident size says nothing
# about the log's bound there.
if ldd "$CMSERVER" 2>/dev/null | grep -qE 'lib(a|t)san'; then
	echo "SKIP: cmserver is built with a sanitizer (its RSS includes shadow memory)"
	exit 77
fi

LOG_MEM=512MiB
BOUND_KIB=$((1024 * 1024))        # the assertion: 1 GiB
CEILING_KIB=$((3 * 1024 * 1024))  # past this the CM is killed: 3 GiB
JOB_TIMEOUT=120                   # cmrun --timeout, seconds
ITERS=${CM_LOG_BOUND_ITERS:-4}    # bidir_window iterations per size
[[ $ITERS =~ ^[1-9][0-9]{0,3}$ ]] || { echo "ERROR: CM_LOG_BOUND_ITERS: 1..9999" >&2; exit 99; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cm-log-bound.XXXXXX") || exit 99
cmrun_pid=
cleanup() {
	[ -n "$cmrun_pid" ] && kill -KILL "$cmrun_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# What bidir_window prints: 23 sizes (1 .. 4 MiB), 64 messages per
# iteration, every size's bytes once per message.
sizes=23 window=64 size_sum=$(((1 << 23) - 1))
expected="bidir_window: window $window, $sizes sizes 1..4194304 bytes, $ITERS iterations each"
for r in 0 1; do
	expected+=$'\n'"rank $r: $((sizes * window * ITERS)) messages, $((window * ITERS * size_sum)) bytes received, every byte checked"
done

hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
parent_of() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $2 }'; }

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# run_mode MODE [CMRUN OPTIONS...]: one job, sampled every 0.2 s.
run_mode() {
	local mode=$1 name=$1
	shift
	local tmp=$work/$name.tmp out=$work/$name.out err=$work/$name.err
	mkdir "$tmp"
	local start=$SECONDS
	TMPDIR=$tmp "$CMRUN" -n 2 -v --mode "$mode" "$@" --log-mem "$LOG_MEM" \
		--timeout "${JOB_TIMEOUT}s" "$prog" "$ITERS" >"$out" 2>"$err" </dev/null &
	cmrun_pid=$!
	local cm="" peak=0 killed=0 kib ticks=0 max_ticks=$(((JOB_TIMEOUT + 30) * 5))
	while kill -0 "$cmrun_pid" 2>/dev/null; do
		if [ -z "$cm" ]; then
			# cmrun -v: "cmserver 0 started (pid P, ...)"; only a child of
			# this cmrun counts (a pid can be reused).
			cm=$(sed -n 's/.*cmserver 0 started (pid \([0-9]*\).*/\1/p' "$err" | head -n 1)
			[ -n "$cm" ] && [ "$(parent_of "$cm")" != "$cmrun_pid" ] && cm=""
		fi
		if [ -n "$cm" ] && kib=$(hwm_kib "$cm") && [ -n "$kib" ]; then
			[ "$kib" -gt "$peak" ] && peak=$kib
			if [ "$kib" -gt "$CEILING_KIB" ] && [ "$killed" = 0 ]; then
				echo "$name: the CM passed $((CEILING_KIB / 1024)) MiB: killing it (pid $cm)"
				kill -KILL "$cm" 2>/dev/null
				kill -TERM "$cmrun_pid" 2>/dev/null
				killed=1
			fi
		fi
		ticks=$((ticks + 1))
		if [ "$ticks" -ge "$max_ticks" ]; then
			echo "$name: cmrun outlived its --timeout by 30 s: killing it"
			kill -KILL "$cmrun_pid" 2>/dev/null
			break
		fi
		sleep 0.2
	done
	local status=0
	wait "$cmrun_pid" || status=$?
	cmrun_pid=
	local secs=$((SECONDS - start))
	echo "$name: CM peak RSS $((peak / 1024)) MiB (bound $((BOUND_KIB / 1024)) MiB)," \
		"exit status $status, $secs s"
	[ -n "$cm" ] || fail "$name: no cmserver pid in cmrun -v's output: $(head -5 "$err")"
	[ "$killed" = 0 ] || fail "$name: CM killed at the $((CEILING_KIB / 1024)) MiB ceiling"
	[ "$peak" -le "$BOUND_KIB" ] ||
		fail "$name: CM peak RSS $((peak / 1024)) MiB > $((BOUND_KIB / 1024)) MiB with --log-mem $LOG_MEM"
	[ "$status" = 0 ] || fail "$name: exit status $status: $(grep -v '^cmrun: \|listening on' "$err" | tail -5)"
	[ "$(cat "$out")" = "$expected" ] ||
		fail "$name: output differs: $(head -c 400 "$out")"
	local left
	left=$(ls -A "$tmp")
	[ -z "$left" ] || fail "$name: left in the CM's \$TMPDIR: $left" \
		"($(grep -E 'cmserver 0 .*(exited|killed)|SIGKILL' "$err" | tr '\n' ' '))"
}

for mode in ${MODES_ONLY:-mono thread-per-client multiplexer specialized}; do
	case $mode in
	multiplexer | specialized) run_mode "$mode" --threads 2 ;;
	*) run_mode "$mode" ;;
	esac
done
[ "$failures" = 0 ] && echo "every mode within $((BOUND_KIB / 1024)) MiB"
[ "$failures" = 0 ]
