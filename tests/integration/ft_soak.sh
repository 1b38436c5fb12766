#!/bin/bash
# Seeded random-kill soak: SOAK_RUNS runs (default 6 in `make check`; `make
# check-soak` runs 100), each killed at random by cmrun's --kill-every with
# its own seed, every one bounded by --timeout (a hang fails the run). The
# kinds of run, in turn:
#   ring, alltoall, ssend, master  programs/ft_suite, re-executed from the start
#   ck64, ck2m   programs/ckpt_kill with application checkpoints (--ckpt-dir,
#                a random --ckpt-every): 64 KiB messages, below cmserver's
#                --cut-through-min (256 KiB), and 2 MiB, above it
#   cktest       the same with MPI_Test polling and MPI_Wtime (events cut by
#                the images)
#   stdin        programs/ft_stdin: rank 0 reads numbers from stdin (kills
#                aimed at rank 0); stdinck the same with checkpoints
#   KIND+cm      KIND with two CMs that are killed too (--cm-restart,
#                --kill-cm-every): a CM's journal recovered, the ranks
#                reconnecting, while ranks die and are replayed
#   KIND+sb      the same with --cm-standby: a CM's death taken over by its
#                standby, which then gets a new standby (restarted on its
#                journal when a death comes before that one is ready)
# The cmserver mode goes round the four (or CHANMEM_TEST_MODE), every other
# round with two CMs. Every run must end with the failure-free output
# (per-rank lines in order, ranks' lines interleaving freely), exit 0, no
# error. The seeds are printed: a failing run is reproduced with
# SOAK_SEED=S SOAK_RUNS=1 (the kind comes from the run number: SOAK_FIRST=I,
# with the same SOAK_KINDS).
# The last line counts the runs, the restarts they made, the hangs and the
# other failures.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
ITERS=20
RUNS=${SOAK_RUNS:-6}
FIRST=${SOAK_FIRST:-0}
SEED=${SOAK_SEED:-$(date +%s)}
# SOAK_KINDS="ck64 ck2m ..." keeps only those kinds (e.g. the checkpoint
# ones: SOAK_KINDS="ck64 ck2m cktest stdinck").
read -r -a KINDS <<<"${SOAK_KINDS:-ck64 ring+cm stdin ck2m+cm alltoall cktest ssend stdinck master ring ck2m master+cm ck64+cm cktest+cm ring+sb ck2m+sb master+sb ck64+sb}"
for k in "${KINDS[@]}"; do
	base=${k%+cm}
	case ${base%+sb} in
	ck64 | ring | stdin | ck2m | alltoall | cktest | ssend | stdinck | master) ;;
	*)
		echo "ERROR: SOAK_KINDS: unknown kind '$k'" >&2
		exit 99
		;;
	esac
done
MODES=(mono thread-per-client multiplexer specialized)
itest_log "soak: $RUNS runs, first seed $SEED"
ITEST_JOB_TIMEOUT=30s
CK64=(ckpt_kill 6000 65536)
CK2M=(ckpt_kill 150 2097152)
CKTEST=(ckpt_kill 3000 65536 0 test)
input="$itest_work/numbers"
seq 1 300 >"$input"

for p in ring alltoall ssend master; do
	ft_ref "soak_ref_$p" -- ft_suite "$p" "$ITERS"
done
ft_ref soak_ref_ck64 -- "${CK64[@]}"
ft_ref soak_ref_ck2m -- "${CK2M[@]}"
ft_ref soak_ref_cktest -- "${CKTEST[@]}"
ITEST_STDIN=$input ft_ref soak_ref_stdin -- ft_stdin

restarts=0 cm_restarts=0 hangs=0 failed=0
RANDOM=$SEED
for ((i = FIRST; i < FIRST + RUNS; i++)); do
	seed=$((SEED + i - FIRST))
	kind=${KINDS[i % ${#KINDS[@]}]}
	cmkill=() suffix=""
	if [ "$kind" != "${kind%+cm}" ]; then
		kind=${kind%+cm} suffix=+cm
		cmkill=(--cm-restart --kill-cm-every $((150 + RANDOM % 300))ms)
	elif [ "$kind" != "${kind%+sb}" ]; then
		kind=${kind%+sb} suffix=+sb
		cmkill=(--cm-standby --kill-cm-every $((150 + RANDOM % 300))ms)
	fi
	mode=${CHANMEM_TEST_MODE:-${MODES[i % ${#MODES[@]}]}}
	cms=$((1 + (i / ${#MODES[@]}) % 2))
	[ ${#cmkill[@]} -gt 0 ] && cms=2
	kills=$((1 + RANDOM % 3))
	every=$((100 + RANDOM % 300))ms
	ckpt=(--ckpt-dir "$itest_work/ck_$i" --ckpt-every $((20 + RANDOM % 280))ms)
	name="soak_${i}_${kind}${suffix}_${mode}_cms${cms}_seed$seed"
	opts=(-v --cms "$cms" --kill-every "$every" --kill-count "$kills" --seed "$seed"
		"${cmkill[@]}")
	before=$itest_failures
	case $kind in
	ck64) ref=ck64 prog=("${CK64[@]}") opts+=("${ckpt[@]}") ;;
	ck2m) ref=ck2m prog=("${CK2M[@]}") opts+=("${ckpt[@]}") ;;
	cktest) ref=cktest prog=("${CKTEST[@]}") opts+=("${ckpt[@]}") ;;
	stdin) ref=stdin prog=(ft_stdin 5) opts+=(--kill-rank 0) ;;
	stdinck) ref=stdin prog=(ft_stdin 5 1) opts+=(--kill-rank 0 "${ckpt[@]}") ;;
	*) ref=$kind prog=(ft_suite "$kind" "$ITERS") ;;
	esac
	# A CM's recovery, on top of images every few tens of ms, takes longer
	# on a loaded machine; a hang still shows.
	timeout=30s
	[ ${#cmkill[@]} -gt 0 ] && timeout=60s
	ITEST_JOB_TIMEOUT=$timeout ITEST_STDIN=$input FT_VERBOSE=1 CHANMEM_TEST_MODE=$mode \
		FT_SLEEP_MS=10 ft_same "$name" "soak_ref_$ref" "${opts[@]}" -- "${prog[@]}"
	n=$(grep -c 'restarting it as incarnation' "$itest_work/$name.err" 2>/dev/null)
	restarts=$((restarts + ${n:-0}))
	c=$(sed -n 's/^cmrun:   channel memories: \([0-9]*\) restart.*/\1/p' \
		"$itest_work/$name.report" 2>/dev/null)
	cm_restarts=$((cm_restarts + ${c:-0}))
	itest_log "  $name: ${n:-0} restarts, ${c:-0} CM restarts"
	if [ "$itest_failures" -ne "$before" ]; then
		if [ "$itest_rc" -eq 124 ]; then hangs=$((hangs + 1)); else failed=$((failed + 1)); fi
	fi
done
itest_log "soak: $RUNS runs, $restarts restarts, $cm_restarts CM restarts, $hangs hangs, $failed other failures"

itest_finish
