#!/bin/bash
# A channel memory's memory stays within its log budget: programs/bidir_window
# (two ranks, 64 sends and 64 receives in flight each way, 1 B .. 4 MiB, about
# 1 GiB per iteration through the CM) runs through one CM with the spill
# store on (cmserver's default), in every mode, with:
#
#  - --log-mem 512MiB: the CM's peak resident memory (VmHWM) must stay
#    within 1 GiB;
#  - --cm-restart --log-mem 8MiB, the CM killed once early on: the CM keeps
#    a journal (spilling is free there, and every receive may read its
#    payload back) and the CM restarted on that journal replays it; every
#    CM process's peak must stay within 40 MiB (8 MiB of log, the rest the
#    process's own);
#  - --cm-standby --log-mem 8MiB: the CM mirrors its journal to a standby;
#    the CM's peak and the standby's must both stay within 40 MiB, also when
#    the CM is killed and the standby takes over (mono and multiplexer).
#
# In every job, the log memory a CM reports at its end ("log memory: bound B
# bytes, peak P in use", cmserver --verbose) must stay within B plus one
# message of the run (4 MiB: a read-back is taken while none other is
# outstanding, whatever the live memory) plus 1 MiB of block rounding.
#
# Every job must end with status 0 and the program's summary, and leave
# nothing in its $TMPDIR (a fresh directory of this test's; the CMs' spill
# stores and journals go there).
#
# Safety: cmrun runs under --timeout, and a CM whose peak passes 3 GiB is
# killed by its pid at once (the job then fails), so a CM without the bound
# cannot take the machine's memory.
#
#   make -C build check TESTS=integration/cm_log_bound.sh
#   MODES_ONLY="mono specialized" CM_LOG_BOUND_ITERS=8 ...   (fewer modes, more data)
#   CM_LOG_BOUND_FT_ITERS=4 ...   (iterations of the --cm-restart/--cm-standby jobs)
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
FT_LOG_MEM=8MiB                   # the --cm-restart and --cm-standby jobs'
FT_BOUND_KIB=$((40 * 1024))       # their assertion: 40 MiB a process
LOG_SLACK=$(((4 + 1) << 20))      # over a CM's reported log peak, bytes
CEILING_KIB=$((3 * 1024 * 1024))  # past this the CM is killed: 3 GiB
JOB_TIMEOUT=120                   # cmrun --timeout, seconds
ITERS=${CM_LOG_BOUND_ITERS:-4}    # bidir_window iterations per size
FT_ITERS=${CM_LOG_BOUND_FT_ITERS:-2}
[[ $ITERS =~ ^[1-9][0-9]{0,3}$ ]] || { echo "ERROR: CM_LOG_BOUND_ITERS: 1..9999" >&2; exit 99; }
[[ $FT_ITERS =~ ^[1-9][0-9]{0,3}$ ]] ||
	{ echo "ERROR: CM_LOG_BOUND_FT_ITERS: 1..9999" >&2; exit 99; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cm-log-bound.XXXXXX") || exit 99
cmrun_pid=
cleanup() {
	[ -n "$cmrun_pid" ] && kill -KILL "$cmrun_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# What bidir_window prints for ITERATIONS: 23 sizes (1 .. 4 MiB), 64
# messages per iteration, every size's bytes once per message.
expected_output() {
	local iters=$1 sizes=23 window=64 size_sum=$(((1 << 23) - 1)) r
	printf 'bidir_window: window %d, %d sizes 1..4194304 bytes, %d iterations each' \
		"$window" "$sizes" "$iters"
	for r in 0 1; do
		printf '\nrank %d: %d messages, %d bytes received, every byte checked' "$r" \
			$((sizes * window * iters)) $((window * iters * size_sum))
	done
}

hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
parent_of() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $2 }'; }

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# The role of cmserver pid: "standby" (cmserver --standby) or "CM".
role_of() {
	if tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qx -- --standby; then
		echo standby
	else
		echo CM
	fi
}

# run_job NAME ITERS LOG_MEM BOUND_KIB [CMRUN OPTIONS...]: one job, every
# cmserver it starts (a CM, a CM restarted, a standby) sampled every 0.2 s.
run_job() {
	local name=$1 iters=$2 log_mem=$3 bound=$4
	shift 4
	local tmp=$work/$name.tmp out=$work/$name.out err=$work/$name.err
	mkdir "$tmp"
	local start=$SECONDS
	TMPDIR=$tmp "$CMRUN" -n 2 -vv "$@" --log-mem "$log_mem" \
		--timeout "${JOB_TIMEOUT}s" "$prog" "$iters" >"$out" 2>"$err" </dev/null &
	cmrun_pid=$!
	local -A peak=() role=()
	local pid killed=0 kib ticks=0 max_ticks=$(((JOB_TIMEOUT + 30) * 5))
	while kill -0 "$cmrun_pid" 2>/dev/null; do
		# cmrun -v: "cmserver K started (pid P, ...)" for each; only a
		# child of this cmrun counts (a pid can be reused).
		for pid in $(sed -n 's/.*cmserver [0-9]* started (pid \([0-9]*\).*/\1/p' "$err"); do
			[ "$(parent_of "$pid")" = "$cmrun_pid" ] || continue
			[ -n "${role[$pid]:-}" ] || { role[$pid]=$(role_of "$pid"); peak[$pid]=0; }
			kib=$(hwm_kib "$pid") && [ -n "$kib" ] || continue
			[ "$kib" -gt "${peak[$pid]}" ] && peak[$pid]=$kib
			if [ "$kib" -gt "$CEILING_KIB" ] && [ "$killed" = 0 ]; then
				echo "$name: a cmserver passed $((CEILING_KIB / 1024)) MiB: killing it (pid $pid)"
				kill -KILL "$pid" 2>/dev/null
				kill -TERM "$cmrun_pid" 2>/dev/null
				killed=1
			fi
		done
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
	local secs=$((SECONDS - start)) peaks="" cms=0 standbys=0
	for pid in "${!role[@]}"; do
		peaks+=" ${role[$pid]} $((peak[$pid] / 1024)) MiB,"
		if [ "${role[$pid]}" = standby ]; then standbys=$((standbys + 1)); else cms=$((cms + 1)); fi
		[ "${peak[$pid]}" -le "$bound" ] ||
			fail "$name: ${role[$pid]} (pid $pid) peak RSS $((peak[$pid] / 1024)) MiB >" \
				"$((bound / 1024)) MiB with --log-mem $log_mem"
	done
	echo "$name: peak RSS${peaks} bound $((bound / 1024)) MiB; exit status $status, $secs s"
	# cmserver --verbose at a clean end (a killed CM says nothing).
	local limit log_peak
	while read -r limit log_peak; do
		echo "$name: a CM's log memory peaked at $log_peak bytes (bound $limit)"
		[ "$log_peak" -le $((limit + LOG_SLACK)) ] ||
			fail "$name: log memory peak $log_peak bytes > $limit + $LOG_SLACK"
	done < <(sed -n 's/.*log memory: bound \([0-9]*\) bytes, peak \([0-9]*\) in use.*/\1 \2/p' "$err")
	grep -q 'log memory: bound' "$err" || fail "$name: no CM reported its log memory"
	[ "$cms" -gt 0 ] || fail "$name: no cmserver pid in cmrun -v's output: $(head -5 "$err")"
	case " $* " in
	*" --cm-standby "*) [ "$standbys" -gt 0 ] || fail "$name: no standby seen" ;;
	esac
	[ "$killed" = 0 ] || fail "$name: a cmserver was killed at the $((CEILING_KIB / 1024)) MiB ceiling"
	[ "$status" = 0 ] || fail "$name: exit status $status: $(grep -v '^cmrun: \|listening on' "$err" | tail -5)"
	[ "$(cat "$out")" = "$(expected_output "$iters")" ] ||
		fail "$name: output differs: $(head -c 400 "$out")"
	local left
	left=$(ls -A "$tmp")
	[ -z "$left" ] || fail "$name: left in the CM's \$TMPDIR: $left" \
		"($(grep -E 'cmserver [0-9]+ .*(exited|killed)|SIGKILL' "$err" | tr '\n' ' '))"
}

threads_of() {
	case $1 in
	multiplexer | specialized) echo "--threads 2" ;;
	esac
}

# A kill half a second in lands early in a job of seconds; one that comes
# after the job ended tests nothing more than the run without it.
kill_early="--kill-cm-at 0:500ms"
note_kill() {
	grep -q 'cmserver 0 (pid [0-9]*) killed by signal SIGKILL' "$work/$1.err" ||
		echo "$1: note: the job ended before the CM kill: no recovery was exercised"
}

modes=${MODES_ONLY:-mono thread-per-client multiplexer specialized}
for mode in $modes; do
	# shellcheck disable=SC2046 # --threads N: two words
	run_job "$mode" "$ITERS" "$LOG_MEM" "$BOUND_KIB" --mode "$mode" $(threads_of "$mode")
done
for mode in $modes; do
	# shellcheck disable=SC2046,SC2086
	run_job "$mode-cm-restart" "$FT_ITERS" "$FT_LOG_MEM" "$FT_BOUND_KIB" --mode "$mode" \
		$(threads_of "$mode") --cm-restart $kill_early
	note_kill "$mode-cm-restart"
done
for mode in $modes; do
	# shellcheck disable=SC2046
	run_job "$mode-cm-standby" "$FT_ITERS" "$FT_LOG_MEM" "$FT_BOUND_KIB" --mode "$mode" \
		$(threads_of "$mode") --cm-standby
done
for mode in $modes; do
	case $mode in
	mono | multiplexer) ;;
	*) continue ;;
	esac
	# shellcheck disable=SC2046,SC2086
	run_job "$mode-cm-standby-takeover" "$FT_ITERS" "$FT_LOG_MEM" "$FT_BOUND_KIB" \
		--mode "$mode" $(threads_of "$mode") --cm-standby $kill_early
	note_kill "$mode-cm-standby-takeover"
done
[ "$failures" = 0 ] && echo "every mode within $((BOUND_KIB / 1024)) MiB, and within" \
	"$((FT_BOUND_KIB / 1024)) MiB a cmserver with --log-mem $FT_LOG_MEM under --cm-restart" \
	"and --cm-standby"
[ "$failures" = 0 ]
