#!/bin/bash
# cmserver --standby and --mirror, as a user or a broken peer meets them:
# the options that contradict each other are refused; a standby turns away
# anything that is not its CM's stream (garbage, a rank, a wrong secret, a
# second CM) and stays up; the copy it keeps is byte for byte the CM's
# journal; a CM that ends cleanly releases its standby (exit 0); a CM whose
# standby dies stops, so that the two never both answer; and a standby
# whose CM was killed takes over on its own address, where a rank that
# already knew it finishes the job.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup

CMSERVER_BIN=${CMSERVER:?CMSERVER not set (run through make check)}
RING=${PROGDIR:?PROGDIR not set (run through make check)}/ft_suite
[ -x "$CMSERVER_BIN" ] && [ -x "$RING" ] || itest_hard_error "cmserver or ft_suite not built"
export CHANMEM_SECRET=0123456789abcdef0123456789abcdef
W=$itest_work
itest_elapsed=0 # what itest_pass prints: these checks are not timed
ITERS=100 # ring iterations: about 1 s at 10 ms each, long enough to kill a CM in
pids=()
cleanup_pids() {
	local p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	pids=()
}
trap cleanup_pids EXIT

# start NAME [cmserver options]: a cmserver in the background, its TCP
# address in $addr once it listens (within 10 s), its pid in $pid.
start() {
	local name=$1 i
	shift
	"$CMSERVER_BIN" --no-unix -v "$@" >"$W/$name.out" 2>"$W/$name.err" &
	pid=$!
	pids+=("$pid")
	addr=""
	for i in $(seq 1 100); do
		addr=$(sed -n 's/^cmserver: listening on \([^ ]*\).*/\1/p' "$W/$name.out")
		[ -n "$addr" ] && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# waits up to 10 s for pid to end; its status in $status (124: still running).
wait_end() {
	local p=$1 i
	for i in $(seq 1 100); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$p" 2>/dev/null; then
		status=124
	else
		wait "$p"
		status=$?
	fi
}

# A HELLO frame (header and payload, as printf escapes) of peer kind KIND
# with SECRET.
hello() { # KIND SECRET
	local le32
	le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) \
		$((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
	printf '\\x01\\x01\\x00\\x00%s%s%s%s%s%s' "$(le32 0)" "$(le32 0)" "$(le32 0)" "$(le32 0)" \
		"$(le32 48)" '\x00\x00\x00\x00\x00\x00\x00\x00'
	printf '%s%s%s%s%s' "$(le32 0)" "$(le32 2)" "$(le32 "$1")" "$(le32 0)" "$2"
}

# turned_away ADDR BYTES: connects, sends BYTES (printf escapes) and reads
# what comes back; true when the standby closed the connection (or reset
# it, unread bytes and all) within 3 s without answering a byte.
turned_away() {
	local host=${1%:*} port=${1##*:} st
	exec 3<>"/dev/tcp/$host/$port" || return 1
	printf "$2" >&3
	timeout 3 cat <&3 >"$W/reply"
	st=$?
	exec 3<&-
	[ "$st" != 124 ] && [ ! -s "$W/reply" ]
}

# ---- options ----
name=cm_standby_options
"$CMSERVER_BIN" --mirror 127.0.0.1:9 >/dev/null 2>"$W/o1.err"
s1=$?
"$CMSERVER_BIN" --standby --mirror 127.0.0.1:9 --journal "$W/x" >/dev/null 2>"$W/o2.err"
s2=$?
echo "not empty" >"$W/full.j"
"$CMSERVER_BIN" --standby --journal "$W/full.j" --no-unix >/dev/null 2>"$W/o3.err"
s3=$?
"$CMSERVER_BIN" --mirror nowhere --journal "$W/y" >/dev/null 2>"$W/o4.err"
s4=$?
if [ "$s1" != 2 ] || ! grep -q -- '--mirror needs --journal' "$W/o1.err"; then
	itest_fail $name "--mirror without --journal: status $s1: $(cat "$W/o1.err")"
elif [ "$s2" != 2 ] || ! grep -q 'contradict' "$W/o2.err"; then
	itest_fail $name "--standby --mirror: status $s2: $(cat "$W/o2.err")"
elif [ "$s3" != 1 ] || ! grep -q 'not an empty file' "$W/o3.err"; then
	itest_fail $name "--standby on a used journal: status $s3: $(cat "$W/o3.err")"
elif [ "$s4" != 2 ] || ! grep -q -- "--mirror 'nowhere'" "$W/o4.err"; then
	itest_fail $name "--mirror nowhere: status $s4: $(cat "$W/o4.err")"
else
	itest_pass $name
fi

# ---- a standby turns away what is not its CM's stream ----
name=cm_standby_turns_away
if ! start sb1 --standby --journal "$W/sb1.j"; then
	itest_fail $name "the standby did not start: $(cat "$W/sb1.err")"
else
	sb1=$pid sb1_addr=$addr
	bad=""
	turned_away "$sb1_addr" 'GET / HTTP/1.0\r\nHost: standby\r\nUser-Agent: t\r\n\r\n' ||
		bad+=" garbage"
	turned_away "$sb1_addr" "$(hello 0 "$CHANMEM_SECRET")" || bad+=" rank"
	turned_away "$sb1_addr" "$(hello 3 ffffffffffffffffffffffffffffffff)" || bad+=" wrong-secret"
	if [ -n "$bad" ]; then
		itest_fail $name "answered:$bad"
	elif ! kill -0 "$sb1" 2>/dev/null; then
		itest_fail $name "the standby died: $(tail -3 "$W/sb1.err")"
	elif [ -s "$W/sb1.j" ]; then
		itest_fail $name "the standby wrote its journal from a stranger's bytes"
	else
		itest_pass $name
	fi
fi

# ---- the copy, and a clean end ----
# ring RANKS ADDR [STANDBY]: ft_suite ring through the CM at ADDR, output in $W/ring.N.
ring() {
	local n=$1 a=$2 sb=${3:-} r rp=()
	for ((r = 0; r < n; r++)); do
		CHANMEM_TRANSPORT=cm CHANMEM_CMS=$a CHANMEM_RANK=$r CHANMEM_SIZE=$n \
			CHANMEM_CM_STANDBYS=$sb CHANMEM_CM_RECONNECT=${sb:+30} FT_SLEEP_MS=${SLEEP:-0} \
			"$RING" ring "${ITERS:-40}" >"$W/ring.$r" 2>"$W/ring.$r.err" &
		rp+=($!)
	done
	ring_status=0
	for r in "${rp[@]}"; do wait "$r" || ring_status=1; done
}

name=cm_standby_copy
if [ -z "${sb1:-}" ] || ! kill -0 "$sb1" 2>/dev/null; then
	itest_fail $name "no standby"
elif ! start cm1 --journal "$W/cm1.j" --mirror "$sb1_addr"; then
	itest_fail $name "the CM did not start: $(cat "$W/cm1.err")"
else
	cm1=$pid cm1_addr=$addr
	# A second CM cannot take the standby over.
	"$CMSERVER_BIN" --no-unix --journal "$W/cm2.j" --mirror "$sb1_addr" >/dev/null \
		2>"$W/cm2.err"
	s2=$?
	ring 2 "$cm1_addr"
	for r in 0 1; do cp "$W/ring.$r" "$W/ref.$r"; done
	kill -TERM "$cm1"
	wait_end "$cm1"
	cm_status=$status
	wait_end "$sb1"
	if [ "$ring_status" != 0 ]; then
		itest_fail $name "the ring failed: $(cat "$W/ring.0.err")"
	elif [ "$s2" != 1 ] || ! grep -q 'no HELLO_ACK' "$W/cm2.err"; then
		itest_fail $name "a second CM was not refused (status $s2): $(cat "$W/cm2.err")"
	elif [ "$cm_status" != 0 ] || [ "$status" != 0 ]; then
		itest_fail $name "after SIGTERM: CM status $cm_status, standby status $status"
	elif ! cmp -s "$W/cm1.j" "$W/sb1.j" || ! cmp -s "$W/cm1.j.data" "$W/sb1.j.data"; then
		itest_fail $name "the standby's copy differs from the CM's journal"
	elif ! grep -q 'ended cleanly' "$W/sb1.err"; then
		itest_fail $name "the standby did not see the clean end: $(tail -2 "$W/sb1.err")"
	else
		itest_pass $name
	fi
fi
cleanup_pids

# ---- a CM whose standby dies stops ----
name=cm_standby_lost
if start sb2 --standby --journal "$W/sb2.j" && sb2=$pid && sb2_addr=$addr &&
	start cm3 --journal "$W/cm3.j" --mirror "$sb2_addr"; then
	cm3=$pid
	kill -KILL "$sb2"
	wait "$sb2" 2>/dev/null
	wait_end "$cm3"
	if [ "$status" != 1 ] || ! grep -q 'standby at .* lost' "$W/cm3.err"; then
		itest_fail $name "the CM went on without its standby (status $status):" \
			"$(tail -2 "$W/cm3.err")"
	else
		itest_pass $name
	fi
else
	itest_fail $name "could not start the pair"
fi
cleanup_pids

# ---- a killed CM's standby takes over ----
# takeover_verdict NAME STANDBY: a ring run whose CM was killed, and whose
# standby ($W/STANDBY.err; its exit status after SIGTERM in $status) took
# over: the ring ended as without a failure, and the standby cleanly.
takeover_verdict() {
	local name=$1 sb=$2
	if [ "$ring_status" != 0 ]; then
		itest_fail $name "the ring failed: $(tail -3 "$W/ring.0.err")"
	elif ! grep -q 'taking over' "$W/$sb.err"; then
		itest_fail $name "the standby did not take over: $(tail -3 "$W/$sb.err")"
	elif ! cmp -s "$W/ring.0" "$W/ref.0" || ! cmp -s "$W/ring.1" "$W/ref.1"; then
		itest_fail $name "the output differs from the run without a failure"
	elif [ "$status" != 0 ]; then
		itest_fail $name "the standby exited with $status after SIGTERM"
	else
		itest_pass $name
	fi
}

name=cm_standby_takes_over
if start sb4 --standby --journal "$W/sb4.j" && sb4=$pid && sb4_addr=$addr &&
	start cm4 --journal "$W/cm4.j" --mirror "$sb4_addr"; then
	cm4=$pid
	(sleep 0.5 && kill -KILL "$cm4") &
	killer=$!
	SLEEP=10 ring 2 "$(sed -n 's/^cmserver: listening on \([^ ]*\).*/\1/p' "$W/cm4.out")" \
		"$sb4_addr"
	wait "$killer"
	kill -TERM "$sb4"
	wait_end "$sb4"
	takeover_verdict $name sb4
else
	itest_fail $name "could not start the pair"
fi
cleanup_pids

# ---- a CM restarted on its journal gets a standby, which takes over ----
# The CM runs without a standby and is killed; started again on its journal
# with --mirror, it first copies the whole journal to the standby (which
# sat idle until then), and only then serves; killed again, the standby
# takes over from that copy and the ring finishes as without a failure.
name=cm_standby_restarted_cm
if start sb6 --standby --journal "$W/sb6.j" && sb6=$pid && sb6_addr=$addr &&
	start cm6 --journal "$W/cm6.j"; then
	cm6_addr=$addr
	(
		sleep 0.4
		kill -KILL "$pid"
		sleep 0.1
		"$CMSERVER_BIN" --no-unix -v --listen "$cm6_addr" --journal "$W/cm6.j" \
			--mirror "$sb6_addr" >"$W/cm6b.out" 2>"$W/cm6b.err" &
		again=$!
		sleep 0.5
		kill -KILL "$again"
	) &
	killer=$!
	SLEEP=10 ring 2 "$cm6_addr" "$sb6_addr"
	wait "$killer"
	kill -TERM "$sb6"
	wait_end "$sb6"
	if ! grep -q 'copied whole to the standby' "$W/cm6b.err"; then
		itest_fail $name "the restarted CM did not copy its journal: $(tail -3 "$W/cm6b.err")"
	else
		takeover_verdict $name sb6
	fi
else
	itest_fail $name "could not start the CM and its idle standby"
fi
cleanup_pids

# ---- a standby whose CM left before the copy was whole does not serve ----
name=cm_standby_not_whole
if start sb7 --standby --journal "$W/sb7.j" && sb7=$pid && sb7_addr=$addr; then
	# A CM's stream that sends the journal's first bytes and stops: no mark.
	{
		printf "$(hello 3 "$CHANMEM_SECRET")"
		sleep 0.3
		# MIRROR (type 18) of 16 bytes at offset 0 of the records file.
		printf '\x01\x12\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
		printf '\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
		printf 'chanmemJ\x01\x00\x00\x00\x00\x00\x04\x00'
		sleep 0.3
	} | timeout 5 bash -c "exec 3<>/dev/tcp/${sb7_addr%:*}/${sb7_addr##*:}; cat >&3; sleep 0.3" \
		2>/dev/null
	wait_end "$sb7"
	if [ "$status" != 1 ] || ! grep -q 'before its journal was copied whole' "$W/sb7.err"; then
		itest_fail $name "status $status: $(tail -3 "$W/sb7.err")"
	elif grep -q 'taking over' "$W/sb7.err"; then
		itest_fail $name "the standby took over from a copy that was not whole"
	else
		itest_pass $name
	fi
else
	itest_fail $name "the standby did not start"
fi
cleanup_pids
itest_finish
