#!/bin/bash
# Application checkpoints end to end (docs/checkpointing.md): programs/ckpt_ring
# registers its state and checkpoints every step under cmrun --ckpt-dir. A
# rank killed mid-run must restart from its latest image (it reports where
# it resumed: later than the start, so the replay is shorter), and the job's
# output must be the failure-free run's. The CM's final report (cmrun -v)
# shows the log entries the committed images let it drop. Retention: a job
# that succeeds removes its images, --ckpt-keep or a failure keeps them
# (ckptserver --list shows them), jobs sharing a directory keep apart.
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
# Checkpoints on, nobody killed: same output; the job succeeded, so its
# images are gone (ckpt_keep below shows it made some).
ckpt_job ckpt_none -1 -1 0 0
if itest_selected ckpt_none; then
	left=$(ls "$itest_work/ck_ckpt_none" 2>/dev/null | grep -c '^img-')
	if [ "$left" -ne 0 ]; then
		itest_fail ckpt_none.images "$left image file(s) left after a successful job"
	else
		itest_pass ckpt_none.images
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

# Retention (docs/checkpointing.md): ckptserver --list prints a header and
# one line per job and rank: JOB RANK GENERATION SIZE STORED TIME IMAGES.
# ckpt_list DIR: those lines without the header, sorted.
ckpt_list() {
	"$CKPTSERVER" --list --dir "$1" | sed 1d | sort
}

# ckpt_lines_ok NAME DIR JOB RANK_GEN...: DIR lists job JOB with exactly
# the ranks 0..NP-1, 2 images each (ckptserver's --keep default); a
# RANK:GEN argument also wants that rank's newest generation.
ckpt_lines_ok() {
	local name=$1 dir=$2 job=$3
	shift 3
	local lines
	lines=$(ckpt_list "$dir" | awk -v j="$job" '$1 == j')
	local ranks
	ranks=$(printf '%s\n' "$lines" | awk '$7 == 2 { print $2 }' | sort -n | tr '\n' ' ')
	if [ "$ranks" != "$(seq -s ' ' 0 $((NP - 1))) " ]; then
		itest_fail "$name" "ckptserver --list shows ranks '$ranks' of $job with 2 images, expected 0..$((NP - 1)):"
		ckpt_list "$dir" | sed 's/^/    /'
		return 1
	fi
	local want
	for want in "$@"; do
		if ! printf '%s\n' "$lines" | awk -v r="${want%%:*}" -v g="${want##*:}" \
			'$2 == r && $3 == g { ok = 1 } END { exit !ok }'; then
			itest_fail "$name" "rank ${want%%:*} of $job is not at generation ${want##*:}:"
			printf '%s\n' "$lines" | sed 's/^/    /'
			return 1
		fi
	done
	return 0
}

# --ckpt-keep: a successful job leaves its images; one job id, every rank,
# its newest image the last step's.
name=ckpt_keep
ft_same $name ckpt_ref --ckpt-dir "$itest_work/ck_keep" --ckpt-keep -- ckpt_ring $STEPS
if itest_selected $name && [ -f "$itest_work/$name.out" ]; then
	jobs=$(ckpt_list "$itest_work/ck_keep" | awk '{ print $1 }' | sort -u)
	if [ "$(printf '%s\n' "$jobs" | grep -c .)" -ne 1 ]; then
		itest_fail $name.list "expected one job in --list, got '$jobs'"
	elif ckpt_lines_ok $name.list "$itest_work/ck_keep" "$jobs" \
		$(for r in $(seq 0 $((NP - 1))); do echo "$r:$STEPS"; done); then
		itest_pass "$name.list ($jobs)"
	fi
fi

# A job that fails keeps its images and says where (last, after the fault
# report): rank 1 dies in step 9 and is not restarted, its newest image is
# of step 8 (generation 9).
name=ckpt_fail_keeps
if itest_selected $name; then
	dir="$itest_work/ck_fail"
	FT_KILL_RANK=1 FT_KILL_AT=9 itest_run $name "$NP" --ckpt-dir "$dir" --max-restarts 0 \
		-- ckpt_ring $STEPS
	job=$(sed -n "s|^cmrun: checkpoint images of this job kept in $dir as job \([^ ]*\) (list them: ckptserver --list --dir $dir; remove them: ckptserver --remove .* --dir $dir)\$|\1|p" \
		"$itest_work/$name.err" "$itest_work/$name.report")
	if [ "$itest_rc" -eq 0 ]; then
		itest_fail $name "exit status 0, expected a failure"
	elif [ -z "$job" ]; then
		itest_fail $name "the final message does not say where the images are:"
		tail -n 3 "$itest_work/$name.report" | sed 's/^/    /'
	elif ckpt_lines_ok $name "$dir" "$job" 1:9; then
		# The command the message gives removes them.
		if ! "$CKPTSERVER" --remove "$job" --dir "$dir" >/dev/null; then
			itest_fail $name "ckptserver --remove $job failed"
		elif [ -n "$(ckpt_list "$dir")" ] || ls "$dir" | grep -q '^img-'; then
			itest_fail $name "images left after ckptserver --remove $job"
		else
			itest_pass "$name ($job)"
		fi
	fi
fi

# Jobs one after another in one directory: each removes or keeps its own
# images only. A keeps, B succeeds (removes its own), C fails (keeps).
name=ckpt_two_jobs
if itest_selected $name; then
	dir="$itest_work/ck_shared"
	itest_run $name.a "$NP" --ckpt-dir "$dir" --ckpt-keep -- ckpt_ring 6
	rc_a=$itest_rc
	ckpt_list "$dir" >"$itest_work/$name.a.list"
	itest_run $name.b "$NP" --ckpt-dir "$dir" -- ckpt_ring 6
	rc_b=$itest_rc
	ckpt_list "$dir" >"$itest_work/$name.b.list"
	FT_KILL_RANK=2 FT_KILL_AT=3 itest_run $name.c "$NP" --ckpt-dir "$dir" --max-restarts 0 \
		-- ckpt_ring 6
	rc_c=$itest_rc
	ckpt_list "$dir" >"$itest_work/$name.c.list"
	job_a=$(awk 'NR == 1 { print $1 }' "$itest_work/$name.a.list")
	if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ] || [ "$rc_c" -eq 0 ]; then
		itest_fail $name "exit statuses $rc_a $rc_b $rc_c, expected 0 0 nonzero"
	elif [ "$(wc -l <"$itest_work/$name.a.list")" -ne "$NP" ]; then
		itest_fail $name "job A: expected $NP lines in --list, got $(wc -l <"$itest_work/$name.a.list")"
	elif ! diff -u "$itest_work/$name.a.list" "$itest_work/$name.b.list" >"$itest_work/$name.diff"; then
		itest_fail $name "job B changed what --list shows:"
		sed 's/^/    /' "$itest_work/$name.diff" | head -n 10
	elif ! grep -qxF -f "$itest_work/$name.a.list" "$itest_work/$name.c.list" ||
		[ "$(grep -cvF "$job_a " "$itest_work/$name.c.list")" -ne "$NP" ]; then
		itest_fail $name "after job C, expected job A's lines unchanged and $NP of C:"
		sed 's/^/    /' "$itest_work/$name.c.list"
	elif [ "$(grep -cxF -f "$itest_work/$name.a.list" "$itest_work/$name.c.list")" -ne "$NP" ]; then
		itest_fail $name "job A's lines changed after job C"
	else
		itest_pass $name
	fi
fi

itest_bad_ckpt() { # NAME PATTERN [cmrun options]
	itest_bad_usage "$1" "$NP" "$2" "${@:3}" -- ckpt_ring 1
}
itest_bad_ckpt ckpt_opt_every_alone "--ckpt-every goes with --ckpt-dir" --ckpt-every 1s
itest_bad_ckpt ckpt_opt_every_bad "--ckpt-every takes a duration" --ckpt-dir "$itest_work/x" \
	--ckpt-every soon
itest_bad_ckpt ckpt_opt_direct "--ckpt-dir needs --transport cm" --transport direct \
	--ckpt-dir "$itest_work/x"
itest_bad_ckpt ckpt_opt_keep_alone "--ckpt-keep goes with --ckpt-dir" --ckpt-keep

itest_finish
