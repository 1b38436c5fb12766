#!/bin/bash
# The spill store under faults:
#  - a --spill-dir that cannot be used is refused before the CM listens;
#  - a full disk under --spill-dir: the CM says so once, naming the
#    directory, holds the senders back (its memory stays bounded), and once
#    space is back it writes again and the job ends with every byte checked
#    (needs root to mount a small tmpfs; skipped otherwise);
#  - a CM killed by SIGKILL in the middle of spilling leaves nothing in its
#    $TMPDIR (its files are unlinked as soon as they are open).
set -u

: "${CMRUN:?CMRUN not set (run through make check)}"
: "${CMSERVER:?CMSERVER not set (run through make check)}"
: "${PROGDIR:?PROGDIR not set (run through make check)}"
prog=$PROGDIR/bidir_window
[ -x "$CMRUN" ] && [ -x "$CMSERVER" ] && [ -x "$prog" ] || {
	echo "ERROR: cmrun, cmserver or $prog not built" >&2
	exit 99
}

work=$(mktemp -d "${TMPDIR:-/tmp}/cm-spill-faults.XXXXXX") || exit 99
job=
mounted=
cleanup() {
	[ -n "$job" ] && kill -KILL "$job" 2>/dev/null
	[ -n "$mounted" ] && umount "$mounted" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
pass() { echo "PASS: $*"; }

expected_summary() { # ITERS
	local sizes=23 window=64 size_sum=$(((1 << 23) - 1))
	echo "bidir_window: window $window, $sizes sizes 1..4194304 bytes, $1 iterations each"
	for r in 0 1; do
		echo "rank $r: $((sizes * window * $1)) messages, $((window * $1 * size_sum)) bytes received, every byte checked"
	done
}

# The pid of cmserver 0 from cmrun -v's stderr, once it is there (10 s).
cm_pid() {
	local pid="" i
	for i in $(seq 100); do
		pid=$(sed -n 's/.*cmserver 0 started (pid \([0-9]*\).*/\1/p' "$1" | head -n 1)
		[ -n "$pid" ] && break
		sleep 0.1
	done
	echo "$pid"
}

# ---- a spill directory that cannot be used ----
touch "$work/a-file"
for dir in "$work/a-file" "$work/missing/parent/dir"; do
	CHANMEM_SECRET=0123456789abcdef0123456789abcdef "$CMSERVER" --spill-dir "$dir" \
		--listen 127.0.0.1:0 >"$work/out" 2>"$work/err" </dev/null
	status=$?
	if [ "$status" -ne 1 ]; then
		fail "spill_dir_refused: cmserver --spill-dir $dir exited with $status, not 1"
	elif grep -q listening "$work/out"; then
		fail "spill_dir_refused: cmserver listened before refusing --spill-dir $dir"
	elif ! grep -qF "$dir" "$work/err"; then
		fail "spill_dir_refused: the error does not name $dir: $(cat "$work/err")"
	else
		pass "spill_dir_refused ($dir)"
	fi
done

# ---- a full disk: held back, said once, and on again once there is room ----
if [ "$(id -u)" -ne 0 ] || ! mkdir "$work/full" || ! mount -t tmpfs -o size=48m tmpfs "$work/full" 2>/dev/null; then
	echo "SKIP: disk_full (needs root to mount a tmpfs)"
else
	mounted=$work/full
	"$CMRUN" -n 2 -v --log-mem 128MiB --spill-dir "$work/full" --timeout 120s "$prog" 1 \
		>"$work/full.out" 2>"$work/full.err" </dev/null &
	job=$!
	cm=$(cm_pid "$work/full.err")
	said=0
	for i in $(seq 300); do
		grep -q "spill store $work/full: No space left on device; the log is held in memory and senders are held back" \
			"$work/full.err" && { said=1; break; }
		kill -0 "$job" 2>/dev/null || break
		sleep 0.1
	done
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$cm/status" 2>/dev/null)
	sleep 1 # held back for a while: the CM must not grow meanwhile
	hwm2=$(awk '/^VmHWM:/ { print $2 }' "/proc/$cm/status" 2>/dev/null)
	mount -o remount,size=4g "$work/full"
	wait "$job"
	status=$?
	job=
	if [ "$said" -ne 1 ]; then
		fail "disk_full: no error naming $work/full: $(tail -5 "$work/full.err")"
	elif [ "$(grep -c 'No space left on device' "$work/full.err")" -ne 1 ]; then
		fail "disk_full: the full disk was said more than once"
	elif ! grep -q "spill store $work/full: writing again" "$work/full.err"; then
		fail "disk_full: the CM did not say it writes again"
	elif [ "$status" -ne 0 ]; then
		fail "disk_full: job exit status $status: $(tail -5 "$work/full.err")"
	elif [ "$(cat "$work/full.out")" != "$(expected_summary 1)" ]; then
		fail "disk_full: output differs: $(cat "$work/full.out")"
	elif [ -z "$hwm2" ] || [ "$hwm2" -gt $(((128 + 64) * 1024)) ]; then
		fail "disk_full: the held CM's peak RSS is ${hwm2:-unknown} KiB (bound 128 MiB + 64 MiB overhead)"
	elif [ -n "$(ls -A "$work/full")" ]; then
		fail "disk_full: files left in the spill directory: $(ls -A "$work/full")"
	else
		pass "disk_full (peak RSS ${hwm:-?} KiB when said, ${hwm2} KiB held; every byte checked)"
	fi
	umount "$work/full"
	mounted=
fi

# ---- SIGKILL in the middle of spilling: nothing left in $TMPDIR ----
mkdir "$work/tmp"
TMPDIR=$work/tmp "$CMRUN" -n 2 -v --log-mem 64MiB --timeout 120s "$prog" 8 \
	>"$work/kill.out" 2>"$work/kill.err" </dev/null &
job=$!
cm=$(cm_pid "$work/kill.err")
spilled=0
for i in $(seq 200); do
	# The store holds data on disk: the CM has an open, unlinked file.
	if [ -n "$cm" ] && ls -l "/proc/$cm/fd" 2>/dev/null | grep -q "large-.*(deleted)"; then
		size=$(stat -L -c %s /proc/"$cm"/fd/* 2>/dev/null | sort -n | tail -n 1)
		[ "${size:-0}" -gt $((64 << 20)) ] && { spilled=1; break; }
	fi
	sleep 0.05
done
[ -n "$cm" ] && kill -KILL "$cm"
wait "$job"
status=$?
job=
if [ -z "$cm" ]; then
	fail "cm_sigkill: no cmserver pid in cmrun -v's output"
elif [ "$spilled" -ne 1 ]; then
	fail "cm_sigkill: the CM never spilled 64 MiB"
elif [ "$status" -eq 0 ]; then
	fail "cm_sigkill: the job ended with status 0 though its CM was killed"
elif [ -n "$(ls -A "$work/tmp")" ]; then
	fail "cm_sigkill: left in \$TMPDIR: $(ls -A "$work/tmp")"
else
	pass "cm_sigkill (job status $status, \$TMPDIR empty)"
fi

[ "$failures" -eq 0 ]
