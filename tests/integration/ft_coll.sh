#!/bin/bash
# Collectives under faults (programs/ft_coll). Under the cm transport every
# message of a collective is pushed to its receiver by the receiver's home
# CM without a RECV_REQ (a window of 1 MiB ahead of what the rank
# consumed), and checkpoint images keep the pushed messages held
# unconsumed; this proves it through restarts and replays.
#
# Each job runs ft_coll on 4 ranks: blocking Bcast (rotating root),
# Reduce, Allreduce, Allgather, Alltoall, Gather and Scatter on
# MPI_COMM_WORLD and on an even/odd split of it, then Ibcast + Iallreduce
# on both (MPI_Waitall), and every fourth iteration Bcast, Allreduce,
# Alltoall, Ibcast and Iallreduce on an inter-communicator between the two
# halves (created and freed each time, so checkpoints fall between its
# uses and replays repeat its creation); every rank prints a
# running checksum of all it received once per iteration. Every faulty run
# must exit 0 with exactly the per-rank lines of the failure-free run,
# nothing else on stderr, no process left behind, within its --timeout (a
# hang fails), and it must have been faulted: at least one rank restarted
# (from an image at least once with checkpoints), at least one CM restart
# where CMs are killed.
#
#   - every cmserver mode (or CHANMEM_TEST_MODE), one and two CMs, with
#     checkpoints (--ckpt-dir, a random --ckpt-every; ft_coll's `ckpt`) and
#     without (ranks re-executed from the start), blocks of 4096 bytes
#     (below cmserver's --cut-through-min, 256 KiB) and of 300000 (above
#     it), ranks killed at random (--kill-every, --kill-count, --seed);
#   - the same with two CMs killed at random too (--cm-restart
#     --kill-cm-every): journals recovered, pushes resumed from the push
#     number each rank asks for;
#   - and with --cm-standby: a standby takes over a dead CM.
#   - A memory bound: rank 0 runs 1500 MPI_Bcast of 64 KiB (94 MiB) back
#     to back while ranks 1-3 sleep 2 s before they join; the CM may push
#     a rank only a window (1 MiB) ahead of what it consumed, so the peak
#     RSS (VmHWM, sampled every 0.1 s) of every receiving rank must stay
#     within 16 MiB (FT_COLL_RSS_MIB). Measured 3 MiB each; with the
#     window lifted (CM_PUSH_WINDOW 1 TiB) 38 to 70 MiB for rank 1, which
#     only receives, straight from the root (a leaf of the binomial tree),
#     14 to 25 MiB for rank 3, the other leaf, fed by rank 2.
#
# MODES_ONLY="a b" limits the modes; FT_COLL_KINDS="kill cm sb" the kinds
# of run, FT_COLL_ITERS_SMALL and FT_COLL_ITERS_BIG (1500 and 40) the
# iterations (the sanitizer builds run fewer). MODES_ROTATE=R, a number
# below the number of modes (AddressSanitizer), keeps half of the runs that
# kill ranks only: each mode still runs one with checkpoints and one
# without, one of each size.
# Run I takes seed S+I (in its name; S is printed first and comes from
# FT_COLL_SEED, or the clock): FT_COLL_SEED=S ITEST_ONLY=NAME repeats it
# with the same kind, mode and options.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
SMALL=4096
BIG=300000
ITERS_SMALL=${FT_COLL_ITERS_SMALL:-1500}
ITERS_BIG=${FT_COLL_ITERS_BIG:-40}
CKPT=ckpt
SEED=${FT_COLL_SEED:-$(date +%s)}
[[ $SEED =~ ^[0-9]{1,12}$ ]] || itest_hard_error "FT_COLL_SEED: a number"
read -r -a MODES <<<"${MODES_ONLY:-mono thread-per-client multiplexer specialized}"
# FT_COLL_KINDS="kill cm sb" (the default) keeps only those kinds of run.
KINDS=" ${FT_COLL_KINDS:-kill cm sb} "
ITEST_JOB_TIMEOUT=60s
itest_log "ft_coll: seed $SEED (FT_COLL_SEED=$SEED reproduces these runs)"

ft_ref ftc_ref_small -- ft_coll "$ITERS_SMALL" "$SMALL"
ft_ref ftc_ref_big -- ft_coll "$ITERS_BIG" "$BIG"
ft_ref ftc_ref_small_ckpt -- ft_coll "$ITERS_SMALL" "$SMALL" "$CKPT"
ft_ref ftc_ref_big_ckpt -- ft_coll "$ITERS_BIG" "$BIG" "$CKPT"

# report_count NAME SED-EXPRESSION: the sum of what the expression prints
# from the job's fault report.
report_count() {
	sed -n "$2" "$itest_work/$1.report" 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

# faulted NAME REF CKPT CMKILL [cmrun options] -- PROGRAM ARGS: ft_same
# with -v, then the job must have restarted a rank and, when CMKILL is 1, a
# CM. A kill may land before a rank's first image (it then re-executes
# from the start), so restores from images are counted over the runs with
# checkpoints, and at least one is required at the end.
ckpt_runs=0 ckpt_images=0
faulted() {
	local name=$1 ref=$2 ckpt=$3 cmkill=$4
	shift 4
	itest_selected "$name" || return 0
	local before=$itest_failures restarts images cms
	FT_VERBOSE=1 ft_same "$name" "$ref" -v "$@"
	restarts=$(report_count "$name" 's/^cmrun: fault report: .* \([0-9]*\) restarts\{0,1\} over .*/\1/p')
	images=$(report_count "$name" 's/^cmrun:   rank [0-9]*: .*(\([0-9]*\) from an image.*/\1/p')
	cms=$(report_count "$name" 's/^cmrun:   channel memories: \([0-9]*\) restart.*/\1/p')
	itest_log "  $name: $restarts rank restarts ($images from an image), $cms CM restarts"
	[ "$itest_failures" -ne "$before" ] && return 0
	if [ "$ckpt" = 1 ]; then
		ckpt_runs=$((ckpt_runs + 1)) ckpt_images=$((ckpt_images + images))
	fi
	local why=
	if [ "$restarts" -lt 1 ]; then
		why="no rank was restarted"
	elif [ "$cmkill" = 1 ] && [ "$cms" -lt 1 ]; then
		why="no channel memory was restarted"
	fi
	if [ -n "$why" ]; then
		itest_passes=$((itest_passes - 1)) # ft_same counted it as passed
		itest_fail "$name" "$why"
	fi
}

# run_one I KIND SIZE CKPT: the I-th run, its seed SEED+I. KIND is kill
# (ranks), cm (ranks and CMs, --cm-restart) or sb (ranks and CMs,
# --cm-standby); SIZE small or big; CKPT 0 or 1.
run_one() {
	local i=$1 kind=$2 size=$3 ckpt=$4
	[[ $KINDS == *" $kind "* ]] || return 0
	local seed=$((SEED + i)) mode cms ref prog opts
	RANDOM=$seed
	mode=${CHANMEM_TEST_MODE:-${MODES[i % ${#MODES[@]}]}}
	cms=$((1 + (i / ${#MODES[@]} + i) % 2))
	opts=(--kill-every $((150 + RANDOM % 250))ms --kill-count $((1 + RANDOM % 3))
		--seed "$seed")
	case $kind in
	cm) cms=2 opts+=(--cm-restart --kill-cm-every $((300 + RANDOM % 300))ms) ;;
	sb) cms=2 opts+=(--cm-standby --kill-cm-every $((300 + RANDOM % 300))ms) ;;
	esac
	if [ "$size" = small ]; then
		prog=(ft_coll "$ITERS_SMALL" "$SMALL")
	else
		prog=(ft_coll "$ITERS_BIG" "$BIG")
	fi
	ref=ftc_ref_$size
	if [ "$ckpt" = 1 ]; then
		prog+=("$CKPT") ref=${ref}_ckpt
		opts+=(--ckpt-dir "$itest_work/ck_$i" --ckpt-every $((50 + RANDOM % 100))ms)
	fi
	local name="ftc_${i}_${kind}_${size}_ckpt${ckpt}_${mode}_cms${cms}_seed$seed" cmkill=1
	[ "$kind" = kill ] && cmkill=0
	CHANMEM_TEST_MODE=$mode faulted "$name" "$ref" "$ckpt" "$cmkill" --cms "$cms" "${opts[@]}" \
		-- "${prog[@]}"
}

# Ranks killed: every mode, with checkpoints and without, both sizes.
i=0
for ckpt in 0 1; do
	for size in small big; do
		for m in 0 1 2 3; do
			s=0
			[ "$size" = big ] && s=1
			if ! [[ ${MODES_ROTATE:-} =~ ^[0-9]+$ ]] || [ "$MODES_ROTATE" -ge ${#MODES[@]} ] ||
				[ $(((ckpt + s + i % ${#MODES[@]}) % 2)) -eq 0 ]; then
				run_one "$i" kill "$size" "$ckpt"
			fi
			i=$((i + 1))
		done
	done
done
# Ranks and CMs killed, then with a standby: every mode once each.
run_one 16 cm small 1
run_one 17 cm big 0
run_one 18 cm small 0
run_one 19 cm big 1
run_one 20 sb small 0
run_one 21 sb big 1
run_one 22 sb small 1
run_one 23 sb big 0

# Over a few runs (the TSan suite's two) every kill may come before the
# first image: the requirement holds from four on.
if [ "$ckpt_runs" -ge 4 ] && [ "$ckpt_images" -lt 1 ]; then
	itest_fail ftc_images "no rank of the $ckpt_runs runs with checkpoints was restored from an image"
fi

# The memory bound: a flood of broadcasts toward sleeping ranks. Not under
# a sanitizer: the resident size then includes shadow memory.
BOUND_KIB=$((${FT_COLL_RSS_MIB:-16} * 1024))
FLOOD=(ft_coll flood 1500 65536)

# sample NAME: the peak VmHWM of each rank (the largest over its
# incarnations) into NAME.peak.R until NAME.stop appears.
sample() {
	local err=$itest_work/$1.err stop=$itest_work/$1.stop r pid kib
	local -A peak=()
	while :; do
		local last=0
		[ -e "$stop" ] && last=1
		while read -r r pid; do
			kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
			[ -n "$kib" ] && [ "$kib" -gt "${peak[$r]:-0}" ] && peak[$r]=$kib
		done < <(sed -n 's/^cmrun: rank \([0-9]*\) started (pid \([0-9]*\).*/\1 \2/p' \
			"$err" 2>/dev/null)
		for r in "${!peak[@]}"; do
			echo "${peak[$r]}" >"$itest_work/$1.peak.$r"
		done
		[ "$last" = 1 ] && return 0
		sleep 0.1
	done
}

name=ftc_flood_sleep2s
if ldd "$PROGDIR/ft_coll" 2>/dev/null | grep -qE 'lib(a|t)san'; then
	itest_log "SKIP: $name: built with a sanitizer (the RSS includes shadow memory)"
elif itest_selected "$name"; then
	ft_ref ftc_ref_flood -- "${FLOOD[@]}" 0
	before=$itest_failures
	sample "$name" &
	sampler=$!
	FT_VERBOSE=1 ft_same "$name" ftc_ref_flood -v -- "${FLOOD[@]}" 2000
	touch "$itest_work/$name.stop"
	wait "$sampler"
	if [ "$itest_failures" -eq "$before" ]; then
		over= report=
		for r in 1 2 3; do
			kib=$(cat "$itest_work/$name.peak.$r" 2>/dev/null)
			kib=${kib:-0}
			report+=" rank $r $((kib / 1024)) MiB ($kib KiB)"
			if [ "$kib" -eq 0 ]; then
				over+=" rank $r was never sampled;"
			elif [ "$kib" -gt "$BOUND_KIB" ]; then
				over+=" rank $r peak RSS $kib KiB > $BOUND_KIB KiB;"
			fi
		done
		itest_log "  $name: peak RSS$report (bound $((BOUND_KIB / 1024)) MiB)"
		if [ -n "$over" ]; then
			itest_passes=$((itest_passes - 1)) # ft_same counted it as passed
			itest_fail "$name" "${over%;}"
		fi
	fi
fi

itest_finish
