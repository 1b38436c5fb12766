#!/bin/bash
# A channel memory's death (cmrun --cm-restart): two CMs, killed with
# SIGKILL while the job runs, alone, together with a rank, during a rank's
# replay, during application checkpoints; the restarted CM recovers its
# journal and the ranks reconnect. Every run must end exactly as the
# failure-free run (per-rank output, exit 0), with every kill it asked for
# done and restarted, in every cmserver mode (MODES_ONLY limits them). The
# programs: a master/worker on MPI_ANY_SOURCE with MPI_Iprobe and
# MPI_Wtime, a stencil with MPI_Allreduce (programs/cm_death), a ring of
# 8 MiB messages (programs/ft_suite big: above the cut-through size),
# checkpointed rings of 64 KiB and 2 MiB messages with MPI_Test polling
# (programs/ckpt_kill), and NPcm, which checks every byte it receives.
# A restarted rank's CM dies while its HELLO waits there (programs/ft_suite
# ring, FT_KILL_HOLD_MS).
# CM_DEATH_CASES="master big ..." keeps only those cases (master,
# stencil_with_rank, stencil_during_replay, big, restart_hello, again and
# standby_dies (with --cm-standby only), ck64, ck2m,
# npcm).
# MODES_ROTATE=R (a number) runs each case in R of the modes instead of
# all (AddressSanitizer; see lib.sh's itest_each_mode); MODES_ROTATE=threads
# changes nothing here: the modes run with their default thread count.
# CM_DEATH_CK2M_STEPS (300) shortens the 2 MiB ring where every step is
# slow (ThreadSanitizer): its kills still land in its first seconds.
# CM_DEATH_STANDBY=1 runs them all with cmrun --cm-standby instead: each
# CM mirrors its journal to a standby, which takes over at the CM's first
# death; a second death of the same CM restarts it on the standby's
# journal (ft_cm_standby.sh).
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
ITEST_JOB_TIMEOUT=120s
# Every run lasts at least twice as long as its last kill on an idle
# machine (master 3 s, stencil 3 s, big 2 s, ck64 2.5 s, ck2m 2.5 s, NPcm
# 4 s), so each kill it counts lands before the job ends, and a loaded
# machine only stretches the program.
CK64=(ckpt_kill 800 65536 3 test)
CK2M=(ckpt_kill "${CM_DEATH_CK2M_STEPS:-300}" 2097152 3 test)

FT_CM_OPT=--cm-restart
[ "${CM_DEATH_STANDBY:-0}" = 1 ] && FT_CM_OPT=--cm-standby

# listed CASE...: one of the cases is in CM_DEATH_CASES (or it is unset),
# and with standbys where the case needs them.
listed() {
	local c
	for c in "$@"; do
		case $c in
		again | standby_dies) [ "$FT_CM_OPT" = --cm-standby ] || continue ;;
		esac
		[ -z "${CM_DEATH_CASES:-}" ] || [[ " $CM_DEATH_CASES " == *" $c "* ]] || continue
		return 0
	done
	return 1
}

# The references that the listed cases compare with, once for all modes.
listed master && ft_ref cmd_ref_master --cms 2 -- cm_death master 4000
listed stencil_with_rank stencil_during_replay && ft_ref cmd_ref_stencil --cms 2 -- cm_death stencil 1000
listed big && ft_ref cmd_ref_big --cms 2 -- ft_suite big 20
listed ck64 && ft_ref cmd_ref_ck64 --cms 2 -- "${CK64[@]}"
listed ck2m && ft_ref cmd_ref_ck2m --cms 2 -- "${CK2M[@]}"
listed restart_hello && ft_ref cmd_ref_ring --cms 2 -- ft_suite ring 30
listed again standby_dies && FT_SLEEP_MS=50 ft_ref cmd_ref_ring_long --cms 2 -- ft_suite ring 60

# cm_same NAME REF CM_DEATHS [cmrun options] -- PROGRAM ARGS: as ft_same,
# and the fault report counts CM_DEATHS restarted channel memories.
cm_same() {
	local name=$1 ref=$2 deaths=$3
	shift 3
	itest_selected "$name" || return 0
	local before=$itest_failures
	FT_VERBOSE=1 ft_same "$name" "$ref" --cms 2 "$FT_CM_OPT" "$@"
	[ "$itest_failures" -ne "$before" ] && return 0
	local got
	got=$(sed -n 's/^cmrun:   channel memories: \([0-9]*\) restart.*/\1/p' "$itest_work/$name.report")
	if [ "${got:-0}" -ne "$deaths" ]; then
		itest_fail "$name" "${got:-0} channel memory restarts, expected $deaths"
		itest_passes=$((itest_passes - 1)) # ft_same counted it as passed
	elif grep -E 'when asked to stop|standby at .* lost' "$itest_work/$name.err"; then
		# A CM must end cleanly at the job's end, before its standby.
		itest_fail "$name" "a CM did not stop cleanly (above)"
		itest_passes=$((itest_passes - 1))
	fi
}

# wanted CASE: listed, and this mode is one of those that run it (the
# cases' order, not their names with the mode, numbers them).
wanted() {
	listed "$1" && itest_rotated "$1" "$slot" "$slots" "${MODES_ROTATE:-0}"
}

scenarios() {
	local m=${CHANMEM_TEST_MODE:-mono}
	[ "$FT_CM_OPT" = --cm-standby ] && m=standby_$m
	wanted master && CM_DEATH_SLEEP_MS=2 cm_same "cmd_master_$m" cmd_ref_master 2 \
		--kill-cm-at 0:0.6s --kill-cm-at 1:1.2s -- cm_death master 4000
	# A CM and a rank it is home to, at once; then a CM while a killed rank
	# is being replayed from it.
	wanted stencil_with_rank && CM_DEATH_SLEEP_MS=3 cm_same "cmd_stencil_with_rank_$m" cmd_ref_stencil 1 \
		--kill-at 1:0.8s --kill-cm-at 1:0.8s -- cm_death stencil 1000
	wanted stencil_during_replay && CM_DEATH_SLEEP_MS=3 cm_same "cmd_stencil_during_replay_$m" cmd_ref_stencil 2 \
		--kill-at 0:0.8s --kill-cm-at 0:0.85s --kill-cm-at 1:0.9s -- cm_death stencil 1000
	wanted big && FT_SLEEP_MS=50 cm_same "cmd_big_$m" cmd_ref_big 2 \
		--kill-cm-at 0:0.3s --kill-cm-at 1:0.7s -- ft_suite big 20
	# A restarted rank whose HELLO waits at its CMs (a child of the dead
	# incarnation holds its connections open for 2.5 s) while its home CM
	# dies: it reconnects, and the restarted CM admits it.
	wanted restart_hello && FT_KILL_RANK=1 FT_KILL_AT=5 FT_KILL_HOLD_MS=2500 FT_SLEEP_MS=50 \
		cm_same "cmd_restart_hello_$m" cmd_ref_ring 1 --kill-cm-at 1:1s -- ft_suite ring 30
	# With standbys, the same CM dies again and again, 1.2 s apart: each
	# time its standby takes over, and the CM gets a new standby, copies
	# its journal there and tells its ranks where it is.
	if [ "$FT_CM_OPT" = --cm-standby ] && wanted again; then
		local before=$itest_failures took
		FT_SLEEP_MS=50 cm_same "cmd_again_$m" cmd_ref_ring_long 3 -v --kill-cm-at 0:0.6s \
			--kill-cm-at 0:1.8s --kill-cm-at 0:3s -- ft_suite ring 60
		if [ "$itest_failures" -eq "$before" ] && itest_selected "cmd_again_$m"; then
			took=$(grep -c 'cmserver 0: its standby (pid [0-9]*, host [^)]*) took over' \
				"$itest_work/cmd_again_$m.err")
			if [ "$took" -ne 3 ]; then
				itest_fail "cmd_again_$m" "$took takeovers by a standby, expected 3"
				itest_passes=$((itest_passes - 1))
			fi
		fi
	fi
	# With standbys: CM 0's standby dies 0.5 s after it listens (its CM
	# stops with it and is restarted alone); another standby is started in
	# its place, and the CM's death at 2.5 s is taken over by it.
	if [ "$FT_CM_OPT" = --cm-standby ] && wanted standby_dies; then
		local name="cmd_standby_dies_$m" before=$itest_failures
		(
			for _ in $(seq 200); do
				p=$(sed -n 's/^cmrun: standby of cmserver 0 (pid \([0-9]*\)) listening.*/\1/p' \
					"$itest_work/$name.err" 2>/dev/null | head -n 1)
				[ -n "$p" ] && break
				sleep 0.05
			done
			sleep 0.5
			[ -n "$p" ] && kill -KILL "$p" 2>/dev/null
		) &
		local killer=$!
		# ft_same, not cm_same: the CM's "standby ... lost" is expected here.
		FT_SLEEP_MS=50 FT_VERBOSE=1 ft_same "$name" cmd_ref_ring_long --cms 2 "$FT_CM_OPT" -v \
			--kill-cm-at 0:2.5s -- ft_suite ring 60
		wait "$killer"
		if [ "$itest_failures" -eq "$before" ] && itest_selected "$name"; then
			# Its death is told one of two ways: while the CM runs ("starting
			# another in its place"), or while the CM waits for it after a
			# restart ("restarting the CM on its own journal"); either way a
			# new standby must follow it before the CM's death.
			if ! awk '/standby of cmserver 0 (\(pid [0-9]+\) )?killed by signal SIGKILL/ { dead = 1 }
				dead && /cmserver 0: a new standby \(pid [0-9]+\)/ { found = 1 }
				/cmserver 0: its standby .* took over/ { exit }
				END { exit !found }' "$itest_work/$name.err"; then
				itest_fail "$name" "no standby started in place of the dead one"
				itest_passes=$((itest_passes - 1))
			elif ! grep -q 'cmserver 0: its standby (pid [0-9]*, host [^)]*) took over' \
				"$itest_work/$name.err"; then
				itest_fail "$name" "the CM's death was not taken over by the new standby"
				itest_passes=$((itest_passes - 1))
			fi
		fi
	fi
	wanted ck64 && cm_same "cmd_ck64_$m" cmd_ref_ck64 2 --ckpt-dir "$itest_work/ck64_$m" \
		--ckpt-every 0.15s --kill-every 0.35s --kill-count 2 --kill-cm-every 0.3s \
		--seed 11 -- "${CK64[@]}"
	wanted ck2m && cm_same "cmd_ck2m_$m" cmd_ref_ck2m 2 --ckpt-dir "$itest_work/ck2m_$m" \
		--ckpt-every 0.15s --kill-every 0.35s --kill-count 2 --kill-cm-every 0.3s \
		--seed 5 -- "${CK2M[@]}"

	local name="cmd_npcm_$m"
	local npcm=${NPCM:-$(dirname "$CMRUN")/../netpipe/NPcm}
	if ! wanted npcm || ! itest_selected "$name"; then
		:
	elif [ ! -x "$npcm" ]; then
		itest_log "SKIP: $name: NPcm not built ($npcm)"
	else
		local clean=0
		itest_run "$name" 2 --cms 2 "$FT_CM_OPT" --kill-cm-at 0:0.5s --kill-cm-at 1:1s \
			--kill-cm-at 0:1.5s -- "$(realpath --relative-to="$PROGDIR" "$npcm")" \
			-u 8388608 -t 0.03 -T 1 -o "$itest_work/$name.np" || clean=1
		local got
		got=$(sed -n 's/^cmrun:   channel memories: \([0-9]*\) restart.*/\1/p' \
			"$itest_work/$name.report")
		if [ "$itest_rc" -ne 0 ]; then
			itest_fail "$name" "exit status $itest_rc, expected 0"
			grep -v '^cmrun: ' "$itest_work/$name.err" | head -n 5 | sed 's/^/    /'
		elif [ "${got:-0}" -ne 3 ]; then
			itest_fail "$name" "${got:-0} channel memory restarts, expected 3"
		elif [ "$clean" -ne 0 ]; then
			itest_fail "$name" "processes left behind"
		else
			itest_pass "$name"
		fi
	fi
}

read -r -a modes <<<"${MODES_ONLY:-mono thread-per-client multiplexer specialized}"
slots=${#modes[@]}
for ((slot = 0; slot < slots; slot++)); do
	CHANMEM_TEST_MODE=${modes[slot]} scenarios
done
itest_finish
