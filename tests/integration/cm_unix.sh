#!/bin/bash
# Ranks reach a channel memory on their own host over its abstract unix
# socket (cmrun --cm-socket auto, the default), over TCP with --cm-socket tcp
# or when the CM runs --no-unix; either way the job's output is the same, a
# rank killed and replayed over the unix socket gives the failure-free output
# in every cmserver mode, and the unix socket checks the job secret like TCP.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=3
ITERS=20
CMSERVER_BIN=${CMSERVER:?CMSERVER not set (run through make check)}
[ -x "$CMSERVER_BIN" ] || itest_hard_error "cmserver not found: $CMSERVER_BIN"

# The reference: TCP everywhere, no failure.
ft_ref cmu_ref_tcp --cm-socket tcp -- ft_suite ring "$ITERS"

# socket_kinds PID: "unix", "tcp" or "other" for each socket the process
# holds, sorted; a socket that is in neither table yet (a TCP connect in
# progress) is "other".
socket_kinds() {
	local pid=$1 fd link inode
	for fd in /proc/"$pid"/fd/*; do
		link=$(readlink "$fd" 2>/dev/null) || continue
		case $link in socket:*) ;; *) continue ;; esac
		inode=${link#socket:[}
		inode=${inode%]}
		if awk -v i="$inode" 'NR > 1 && $7 == i {f = 1} END {exit !f}' /proc/net/unix; then
			echo unix
		elif awk -v i="$inode" 'NR > 1 && $10 == i {f = 1} END {exit !f}' \
			/proc/net/tcp /proc/net/tcp6 2>/dev/null; then
			echo tcp
		else
			echo other
		fi
	done | sort
}

# rank_sockets NAME WANT [cmrun options]: runs the ring slowly in the
# background, looks (from outside, /proc) at the sockets of a live rank
# until it holds its CM connection, and checks they are all of kind WANT;
# then the job must end with the reference output.
rank_sockets() {
	local name=$1 want=$2
	shift 2
	itest_selected "$name" || return 0
	local mark="$name.$$.$RANDOM" out=$itest_work/$name seen="" pid i
	printf '%s\n' "$CMRUN -n $NP --tag-output $* ft_suite ring $ITERS" >"$out.cmd"
	CHANMEM_ITEST_MARK=$mark FT_SLEEP_MS=100 setsid timeout -k 10 60 \
		"$CMRUN" -n "$NP" --tag-output "$@" --timeout 50s "$PROGDIR/ft_suite" ring "$ITERS" \
		</dev/null >"$out.out" 2>"$out.err" &
	local job=$! start=$SECONDS
	for i in $(seq 1 200); do # bounded: 200 x 50 ms
		for pid in $(grep -lzx "CHANMEM_RANK=1" \
			$(grep -lzxF "CHANMEM_ITEST_MARK=$mark" /proc/[0-9]*/environ 2>/dev/null) \
			/dev/null 2>/dev/null | cut -d/ -f3); do
			seen=$(socket_kinds "$pid" | tr '\n' ' ')
			case $seen in *unix* | *tcp*) case $seen in *other*) ;; *) break 2 ;; esac ;; esac
		done
		kill -0 "$job" 2>/dev/null || break
		sleep 0.05
	done
	wait "$job"
	itest_rc=$?
	itest_elapsed=$((SECONDS - start))
	itest_check_leftovers "$name" "$mark" "$job"
	local clean=$?
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc"
	elif [ -z "$seen" ]; then
		itest_fail "$name" "never saw rank 1 holding its CM connection"
	elif [ "$seen" != "$want " ]; then
		itest_fail "$name" "rank 1's sockets are '$seen', expected '$want'"
	elif ! diff -u "$itest_work/cmu_ref_tcp.sorted" <(ft_sorted "$name") >"$out.diff"; then
		itest_fail "$name" "output differs from the TCP run"
	elif [ -s "$out.err" ] || [ "$clean" -ne 0 ]; then
		itest_fail "$name" "stderr not empty or processes left behind"
	else
		itest_pass "$name"
	fi
}

rank_sockets cmu_default_unix unix
rank_sockets cmu_forced_tcp tcp --cm-socket tcp

# A CM without its unix socket: ranks fall back to TCP.
cat >"$itest_work/cmserver-no-unix" <<EOF
#!/bin/sh
exec "$CMSERVER_BIN" --no-unix "\$@"
EOF
chmod +x "$itest_work/cmserver-no-unix"
CHANMEM_CMSERVER=$itest_work/cmserver-no-unix rank_sockets cmu_no_unix tcp

# Every mode (one loop and more loops than cores where it takes --threads,
# as ft_modes.sh): the failure-free run and a rank killed mid-run, over unix.
mode_jobs() { # in the mode and thread count itest_each_mode sets
	local tag="cmu_${CHANMEM_TEST_MODE}_t${CHANMEM_CM_THREADS}"
	ft_same "${tag}_clean" cmu_ref_tcp --mode "$CHANMEM_TEST_MODE" -- ft_suite ring "$ITERS"
	FT_KILL_RANK=1 FT_KILL_AT=10 ft_same "${tag}_kill" cmu_ref_tcp --mode "$CHANMEM_TEST_MODE" \
		-- ft_suite ring "$ITERS"
}
itest_each_mode "1 4" mode_jobs
FT_KILL_RANK=0,2 FT_KILL_AT=5 ft_same cmu_kill_two_cms cmu_ref_tcp --cms 2 \
	-- ft_suite ring "$ITERS"

# A cmserver started by hand: a rank with the wrong secret over the unix
# socket is refused, the server stays up and serves the right one.
name=cmu_wrong_secret
if itest_selected $name; then
	good=0123456789abcdef0123456789abcdef
	bad=fedcba9876543210fedcba9876543210
	CHANMEM_SECRET=$good "$CMSERVER_BIN" --ready-fd 3 3>"$itest_work/ready" \
		>/dev/null 2>"$itest_work/$name.server" &
	server=$!
	for i in $(seq 1 100); do
		[ -s "$itest_work/ready" ] && break
		sleep 0.05
	done
	uaddr=$(awk '{print $2}' "$itest_work/ready")
	single() { # SECRET CMS: a one-rank job of programs/hello, no cmrun
		CHANMEM_SECRET=$1 CHANMEM_CMS=$2 CHANMEM_SIZE=1 CHANMEM_RANK=0 \
			CHANMEM_TRANSPORT=cm timeout 20 "$PROGDIR/hello" >"$itest_work/$name.out" \
			2>"$itest_work/$name.err"
	}
	single "$bad" "$uaddr"
	bad_rc=$?
	bad_err=$(cat "$itest_work/$name.err")
	single "$good" "$uaddr"
	good_rc=$?
	single "$good" "unix:/tmp/x"
	path_rc=$?
	path_err=$(cat "$itest_work/$name.err")
	kill -TERM "$server"
	wait "$server"
	server_rc=$?
	itest_elapsed=0
	if [[ $uaddr != unix:@* ]]; then
		itest_fail $name "ready line '$(cat "$itest_work/ready")' has no unix address"
	elif [ "$bad_rc" -eq 0 ] || [[ $bad_err != *"wrong job secret"* ]]; then
		itest_fail $name "a rank with the wrong secret was not refused: $bad_err"
	elif [ "$good_rc" -ne 0 ]; then
		itest_fail $name "after the refusal, a rank with the right secret failed ($good_rc)"
	elif [ "$server_rc" -ne 0 ]; then
		itest_fail $name "cmserver exit status $server_rc after SIGTERM, expected 0"
	elif [ "$path_rc" -eq 0 ] || [[ $path_err != *"only abstract unix sockets"* ]]; then
		itest_fail $name "a unix:PATH address was not refused clearly: $path_err"
	else
		itest_pass $name
	fi
fi

itest_bad_usage cmu_opt_value 1 "--cm-socket takes auto or tcp, not 'udp'" --cm-socket udp \
	-- hello
itest_bad_usage cmu_opt_direct 2 "--cm-socket apply to --transport cm only" \
	--transport direct --cm-socket tcp -- hello

itest_finish
