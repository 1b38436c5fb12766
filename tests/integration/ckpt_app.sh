#!/bin/bash
# Application checkpoints end to end (docs/checkpointing.md): programs/ckpt_ring
# registers its state and checkpoints every step under cmrun --ckpt-dir. A
# rank killed mid-run must restart from its latest image (it reports where
# it resumed: later than the start, so the replay is shorter), and the job's
# output must be the failure-free run's. The CM's final report (cmrun -v)
# shows the log entries the committed images let it drop.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
STEPS=30
rep="$itest_work/report"

# resumed NAME RANK: the step rank RANK resumed at (its last report), or "".
resumed() {
	sed -n 's/^resumed at step \([0-9]*\) incarnation [0-9]*$/\1/p' "$rep/$1/rank.$2" \
		2>/dev/null | tail -n 1
}

# ckpt_job NAME RANK AT MIN MAX [cmrun options]: rank RANK killed at step AT
# (-1: no kill) must resume at a step in [MIN, MAX] (MIN -1: must restart
# from the start, no image yet); same output as the reference.
ckpt_job() {
	local name=$1 rank=$2 at=$3 min=$4 max=$5
	shift 5
	itest_selected "$name" || return 0
	mkdir -p "$rep/$name"
	local before=$itest_failures
	CKPT_REPORT_DIR="$rep/$name" FT_KILL_RANK=$rank FT_KILL_AT=$at \
		ft_same "$name" ckpt_ref --ckpt-dir "$itest_work/ck_$name" "$@" -- ckpt_ring $STEPS
	[ "$itest_failures" -ne "$before" ] && return 0
	[ "$at" -lt 0 ] && return 0
	local step
	step=$(resumed "$name" "$rank")
	if [ "$min" -lt 0 ]; then
		if [ -n "$step" ]; then
			itest_fail "$name" "rank $rank resumed at step $step without an image"
		else
			itest_pass "$name: restarted from the start (no image yet)"
		fi
	elif [ -z "$step" ]; then
		itest_fail "$name" "rank $rank did not resume from a checkpoint"
	elif [ "$step" -lt "$min" ] || [ "$step" -gt "$max" ]; then
		itest_fail "$name" "rank $rank resumed at step $step, expected $min..$max"
	else
		itest_pass "$name: resumed at step $step (killed in step $at)"
	fi
}

ft_ref ckpt_ref -- ckpt_ring $STEPS
# Checkpoints on, nobody killed: same output, images committed.
ckpt_job ckpt_none -1 -1 0 0
if itest_selected ckpt_none; then
	if [ -n "$(ls -A "$itest_work/ck_ckpt_none" 2>/dev/null)" ]; then
		itest_pass ckpt_none.images
	else
		itest_fail ckpt_none.images "no image in the checkpoint directory"
	fi
fi
# A checkpoint every step: the rank killed in step 20 resumes at 20 (its
# image of step 19), re-executing one step instead of 21.
ckpt_job ckpt_every_step 2 20 20 20
ckpt_job ckpt_kill_rank0 0 7 7 7 --cms 2
# Killed in step 0, before its first image: re-executes from the start.
ckpt_job ckpt_kill_first_step 1 0 -1 -1
# --ckpt-every 60ms with 10 ms steps: the last image is some steps back.
FT_SLEEP_MS=10 ckpt_job ckpt_interval 3 25 1 25 --ckpt-every 60ms
# Another mode of the CM, checkpoints and garbage collection across threads.
ckpt_job ckpt_specialized 1 15 15 15 --mode specialized

# Garbage collection: with -v the CM's final line counts the delivered
# messages committed images let it drop.
name=ckpt_gc
if itest_selected $name; then
	itest_run $name "$NP" -v -v --ckpt-dir "$itest_work/ck_gc" -- ckpt_ring $STEPS
	collected=$(sed -n 's/.*, \([0-9]*\) collected after checkpoints$/\1/p' \
		"$itest_work/$name.err" | head -n 1)
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail $name "exit status $itest_rc"
	elif [ -z "$collected" ] || [ "$collected" -lt $((NP * (STEPS - 1))) ]; then
		itest_fail $name "the CM collected '${collected:-nothing}', expected at least $((NP * (STEPS - 1))) messages"
	else
		itest_pass "$name ($collected messages collected)"
	fi
fi

# Random kills while checkpointing every 50 ms.
FT_SLEEP_MS=10 ft_same ckpt_random ckpt_ref --ckpt-dir "$itest_work/ck_random" \
	--ckpt-every 50ms --kill-every 120ms --kill-count 3 --seed 11 -- ckpt_ring $STEPS

# A program without checkpoint calls still restarts from the start.
ft_ref ckpt_ring_plain_ref -- ft_suite ring 20
FT_KILL_RANK=1 FT_KILL_AT=10 ft_same ckpt_no_calls ckpt_ring_plain_ref \
	--ckpt-dir "$itest_work/ck_plain" -- ft_suite ring 20

itest_bad_ckpt() { # NAME PATTERN [cmrun options]
	itest_bad_usage "$1" "$NP" "$2" "${@:3}" -- ckpt_ring 1
}
itest_bad_ckpt ckpt_opt_every_alone "--ckpt-every goes with --ckpt-dir" --ckpt-every 1s
itest_bad_ckpt ckpt_opt_every_bad "--ckpt-every takes a duration" --ckpt-dir "$itest_work/x" \
	--ckpt-every soon
itest_bad_ckpt ckpt_opt_direct "--ckpt-dir needs --transport cm" --transport direct \
	--ckpt-dir "$itest_work/x"

itest_finish
