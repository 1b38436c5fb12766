#!/bin/bash
# A sending rank's memory stays bounded, with and without channel memory
# deaths.
#
# Without --cm-restart (the default job) a rank queues what the socket
# does not take yet, small sends completing on a copy, at most
# CM_QUEUE_MAX (16 MiB, client/conn.h) over all its connections; a send
# past it waits. The failure-free reference runs below are those jobs:
# programs/retain_stream (see below) and a million 64-byte messages
# through one CM, whose sender's peak RSS must stay within 64 MiB
# (measured 17 to 24 MiB; 234 MiB for the million messages without the
# bound). The direct transport too: programs/send_ahead sends a million
# 64-byte messages to a rank that sleeps 2 s before it reads anything,
# within 64 MiB (235 MiB without the bound), output equal to a run
# without the sleep; and with "both" the two ranks send to each other
# before either receives, so each one's held-back sends must keep taking
# in the other's (no deadlock, same output as through a CM).
#
# The replication transport (--replicate 2) copies every message it sends,
# so every send completes at once: rank 0's master keeps its copy until
# each replica of rank 1 has it in its kernel, and rank 0's other replica
# keeps one (a backup) until the master commits it. Each replica holds at
# most CM_QUEUE_MAX of copies and queued frames, and waits past it. The
# same send_ahead jobs run with --replicate 2: a million 64-byte messages,
# then "mixed" (16384 messages, of every 64 one of 1 MiB, 15 of 16 KiB,
# 48 of 64 bytes: 320 MiB in all) toward a rank 1 whose replicas sleep 2 s;
# the peak RSS of each of rank 0's replicas must stay within 64 MiB
# (measured 17 to 20 MiB; without the bound 325 MiB for "mixed", and the
# million messages reached 398 MiB and did not end within the job's 300 s,
# nor did the exchange), with the output of the direct run, also with
# rank 0's master killed 1 s in (its replica takes over with its
# backups); and the exchange ("both") must not deadlock.
#
# With --cm-restart a rank keeps every message it wrote until its
# CM says it is logged, at most CM_RETAIN_MAX (64 MiB) per connection, and
# waits for LOGGED past it (client/conn.h). programs/retain_stream (rank 0
# streams bursts of 64 B, 16 KiB, 48 KiB, 1 MiB and 4 MiB messages at
# rank 1, about 3 GiB with 5 rounds; 256 MiB per round are 16 KiB eager
# sends that complete on a copy, so the sender runs ahead of its CM) goes
# through one CM killed with SIGKILL every 0.5 s (12 times) and restarted;
# so do a million 64-byte messages (then 224 MiB of larger ones), whose
# cost to the sender is mostly the bookkeeping of each kept message, and
# again through a CM with --log-mem 8MiB, which holds the sender back
# (stops reading it) while the sender may be waiting for LOGGED.
# The sending rank's peak resident memory (VmHWM, sampled every 0.2 s)
# must stay within 160 MiB (64 MiB retained; the program, the library and
# the allocator's slack, measured 10 to 40 MiB; without the bound it
# reaches 250 MiB and more), the job must end with status 0, with every
# kill done and restarted, and print exactly what the failure-free run
# prints.
#
# Safety: cmrun runs under --timeout, and a sender whose peak passes 2 GiB
# is killed by its pid at once (the job then fails).
#
#   make -C build check TESTS=integration/rank_retain_bound.sh
#   MODES_ONLY="mono specialized" RETAIN_ROUNDS=10 ...   (more modes, more data)
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

# Sanitizers add shadow memory to every page: the resident size says nothing
# about the bound there.
if ldd "$PROGDIR/retain_stream" 2>/dev/null | grep -qE 'lib(a|t)san'; then
	echo "SKIP: built with a sanitizer (the rank's RSS includes shadow memory)"
	exit 77
fi

NP=2
ITEST_JOB_TIMEOUT=300s
ITEST_OUTER_TIMEOUT=360
ROUNDS=${RETAIN_ROUNDS:-5}
[[ $ROUNDS =~ ^[1-9][0-9]{0,3}$ ]] || itest_hard_error "RETAIN_ROUNDS: 1..9999"
BOUND_KIB=$((160 * 1024))        # the assertion
QUEUE_BOUND_KIB=$((64 * 1024))   # the same without --cm-restart
CEILING_KIB=$((2 * 1024 * 1024)) # past this the sender is killed
KILLS=12

TINY=1000000  # 64-byte messages in the second job
AHEAD=1000000 # send_ahead's messages toward a sleeping rank
EXCHANGE=200000
MIXED=16384 # send_ahead's mixed stream: 320 MiB

hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# sample NAME: the peak VmHWM of rank 0 (the largest of every incarnation
# or replica cmrun -v names) into NAME.peak until NAME.stop appears; kills
# a process of it past the ceiling.
sample() {
	local err=$itest_work/$1.err stop=$itest_work/$1.stop pid peak=0 kib
	while [ ! -e "$stop" ]; do
		while read -r pid; do
			kib=$(hwm_kib "$pid")
			[ -n "$kib" ] || continue
			[ "$kib" -gt "$peak" ] && peak=$kib
			if [ "$kib" -gt "$CEILING_KIB" ]; then
				echo "$1: rank 0 passed $((CEILING_KIB / 1024)) MiB: killing it (pid $pid)"
				kill -KILL "$pid" 2>/dev/null
			fi
		done < <(sed -n 's/.*rank 0 \(replica [0-9]* \)\{0,1\}started (pid \([0-9]*\).*/\2/p' \
			"$err" 2>/dev/null)
		echo "$peak" >"$itest_work/$1.peak"
		sleep 0.2
	done
}

# peak_within NAME BOUND_KIB FN ARGS: runs FN ARGS (a job named NAME
# that counts as passed, run with -v) while sampling rank 0; then rank 0's
# peak RSS must be within BOUND_KIB. 1 if it was not (the pass is taken
# back), or the job itself failed.
peak_within() {
	local name=$1 bound=$2
	shift 2
	local before=$itest_failures sampler peak
	sample "$name" &
	sampler=$!
	"$@"
	touch "$itest_work/$name.stop"
	wait "$sampler"
	peak=$(cat "$itest_work/$name.peak")
	itest_log "$name: rank 0 peak RSS $((peak / 1024)) MiB (bound $((bound / 1024)) MiB)"
	[ "$itest_failures" -ne "$before" ] && return 1
	if [ "$peak" -eq 0 ]; then
		itest_fail "$name" "rank 0's memory was never sampled"
	elif [ "$peak" -gt "$bound" ]; then
		itest_fail "$name" "rank 0 peak RSS $((peak / 1024)) MiB > $((bound / 1024)) MiB"
	else
		return 0
	fi
	itest_passes=$((itest_passes - 1)) # counted as passed by the job
	return 1
}

# The failure-free references, no --cm-restart: the queue bound.
peak_within rrb_ref_stream "$QUEUE_BOUND_KIB" ft_ref rrb_ref_stream -v --cms 1 -- \
	retain_stream "$ROUNDS"
peak_within rrb_ref_tiny "$QUEUE_BOUND_KIB" ft_ref rrb_ref_tiny -v --cms 1 -- \
	retain_stream 1 1 "$TINY"

# The direct transport: a receiver asleep (compared with a run where it
# does not sleep), then two ranks sending to each other at once (compared
# with the same through a CM).
ft_ref rrb_ref_ahead --transport direct -- send_ahead "$AHEAD" 0
if itest_selected rrb_ahead_direct; then
	FT_VERBOSE=1 peak_within rrb_ahead_direct "$QUEUE_BOUND_KIB" ft_same rrb_ahead_direct \
		rrb_ref_ahead -v --transport direct -- send_ahead "$AHEAD" 2000
fi
ft_ref rrb_ref_exchange --cms 1 -- send_ahead "$EXCHANGE" 0 both
ft_same rrb_exchange_direct rrb_ref_exchange --transport direct -- \
	send_ahead "$EXCHANGE" 1000 both

# The replication transport: both replicas of rank 0 within the bound
# (the largest is what peak_within checks), a flood of tiny messages and
# one of small and large ones, then the exchange.
if itest_selected rrb_ahead_repl; then
	FT_VERBOSE=1 peak_within rrb_ahead_repl "$QUEUE_BOUND_KIB" ft_same rrb_ahead_repl \
		rrb_ref_ahead -v --replicate 2 -- send_ahead "$AHEAD" 2000
fi
ft_ref rrb_ref_mixed --transport direct -- send_ahead "$MIXED" 0 mixed
if itest_selected rrb_mixed_repl; then
	FT_VERBOSE=1 peak_within rrb_mixed_repl "$QUEUE_BOUND_KIB" ft_same rrb_mixed_repl \
		rrb_ref_mixed -v --replicate 2 -- send_ahead "$MIXED" 2000 mixed
fi
# Rank 0's master killed while it and its replica are held at the bound:
# the replica takes over with its backups (at most the bound) and
# re-sends them.
name=rrb_mixed_repl_kill before=$itest_failures
if itest_selected "$name"; then
	FT_VERBOSE=1 peak_within "$name" "$QUEUE_BOUND_KIB" ft_same "$name" rrb_ref_mixed -v \
		--replicate 2 --kill-at 0:1s --kill-replica 0 -- send_ahead "$MIXED" 2000 mixed
	if [ "$itest_failures" -eq "$before" ] &&
		! grep -q 'rank 0 replica 0 .*killed by signal SIGKILL' "$itest_work/$name.err"; then
		itest_fail "$name" "rank 0's master was not killed"
		itest_passes=$((itest_passes - 1))
	fi
fi
ft_same rrb_exchange_repl rrb_ref_exchange --replicate 2 -- send_ahead "$EXCHANGE" 1000 both

# bounded NAME REF [CMRUN OPTIONS] -- PROGRAM ARGS: as ft_same, through
# one CM killed KILLS times, and rank 0's peak RSS within the bound.
bounded() {
	local name=$1 ref=$2
	shift 2
	itest_selected "$name" || return 0
	local restarts
	FT_VERBOSE=1 peak_within "$name" "$BOUND_KIB" ft_same "$name" "$ref" -v --mode "$mode" \
		--cms 1 --cm-restart --max-cm-restarts "$KILLS" --kill-cm-every 0.5s \
		--kill-count "$KILLS" "$@" || return 0
	restarts=$(sed -n 's/^cmrun:   channel memories: \([0-9]*\) restart.*/\1/p' \
		"$itest_work/$name.report")
	itest_log "$name: ${restarts:-0} CM restarts, ${itest_elapsed} s"
	if [ "${restarts:-0}" -ne "$KILLS" ]; then
		itest_fail "$name" "${restarts:-0} channel memory restarts, expected $KILLS"
	else
		return 0
	fi
	itest_passes=$((itest_passes - 1)) # ft_same counted it as passed
}

for mode in ${MODES_ONLY:-mono}; do
	bounded "rrb_stream_$mode" rrb_ref_stream -- retain_stream "$ROUNDS"
	bounded "rrb_tiny_$mode" rrb_ref_tiny -- retain_stream 1 1 "$TINY"
	# The CM holds the sender back at its --log-mem while the sender may
	# wait for LOGGED past its own bound: both must go on.
	# (-vv: cmserver -v prints how often it held a sender back.)
	name="rrb_held_$mode" before=$itest_failures
	bounded "$name" rrb_ref_tiny -vv --log-mem 8MiB -- retain_stream 1 1 "$TINY"
	if itest_selected "$name" && [ "$itest_failures" -eq "$before" ] &&
		! grep -Eq 'senders held back [1-9]' "$itest_work/$name.err"; then
		itest_fail "$name" "the CM never held the sender back at --log-mem 8MiB"
		itest_passes=$((itest_passes - 1))
	fi
done
itest_finish
