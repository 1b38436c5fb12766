#!/bin/bash
# Failures cmrun stops on or reports instead of tolerating them silently
# (docs/fault-tolerance.md, "Failure handling"), with programs/ft_faults:
#   leave_*      a rank returns from main / calls exit(0) without MPI_Finalize
#                while the others wait in MPI_Barrier: the job stops at once,
#                exit 1, one line naming the rank (heartbeats on and off)
#   segv_bug     a rank dies of SIGSEGV at the same point of every
#                re-execution: restarted once, then the job stops saying it
#                is a bug, exit 139; the fault report counts one restart
#   segv_once    a transient SIGSEGV: restarted, the failure-free output
#   kill_report  an injected kill: the failure-free output and the report
#   clean        a run without faults prints nothing on stderr
#   cm_dies      a CM killed from outside: its death is the first line
#   kill_rank    --kill-every --kill-rank R with the default --kill-count
#   repl_quiet   --replicate 2, a replica killed: exit 0, nothing on stderr
#   ckpt_resume  a rank restored from an image prints a line its predecessor
#                did not: every line whole and once, that line included
#   vary_*       a re-executed rank prints some of its old lines with other
#                contents (the last one before the kill, several, all; from
#                the start or restored and adding its line): each once
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=3
STEPS=8

# expect_err NAME ERE: some stderr line matches ERE.
expect_err() {
	grep -Eq "$2" "$itest_work/$1.err"
}

# expect_report NAME ERE: some fault report line matches ERE.
expect_report() {
	grep -Eq "$2" "$itest_work/$1.report"
}

# check NAME CONDITION-DESCRIPTION COMMAND...: pass if COMMAND succeeds.
check() {
	local name=$1 what=$2
	shift 2
	if "$@"; then
		itest_pass "$name"
	else
		itest_fail "$name" "$what"
		sed 's/^/    err: /' "$itest_work/$name.err" | head -n 8
		sed 's/^/    report: /' "$itest_work/$name.report" | head -n 8
	fi
}

ft_ref ref -- ft_faults "$STEPS"

for how in return exit; do
	for hb in 10s 0; do
		name=leave_${how}_hb$hb
		itest_selected "$name" || continue
		FAULTS_LEAVE=1 FAULTS_LEAVE_HOW=$how \
			itest_run "$name" "$NP" --heartbeat-timeout "$hb" -- ft_faults "$STEPS"
		check "$name" "exit $itest_rc, expected 1 and the rank named" \
			test "$itest_rc" -eq 1 -a "$(wc -l <"$itest_work/$name.err")" -eq 1 -a \
			-n "$(grep -E '^cmrun: rank 1 \(pid [0-9]+\) exited with status 0 without calling MPI_Finalize; stopping the job$' "$itest_work/$name.err")"
	done
done

# In a build with AddressSanitizer, ASan's SIGSEGV handler is the program's
# own: libchanmem would not install its crash report (docs: not covered)
# and ASan would end the rank with status 1. The SIGSEGV cases leave the
# signal to libchanmem (no effect on other builds).
SEGV_ASAN=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0

if itest_selected segv_bug; then
	ASAN_OPTIONS=$SEGV_ASAN FAULTS_SEGV=1:3 itest_run segv_bug "$NP" -- ft_faults "$STEPS"
	check segv_bug "exit $itest_rc, expected 139, one restart, the bug named" \
		eval 'test "$itest_rc" -eq 139 &&
		expect_err segv_bug "^cmrun: rank 1 killed by signal SIGSEGV again at the same point, after 8 MPI requests \(incarnation 0, re-executed from the start, died there too\): a bug in the program, not a fault; not restarted$" &&
		expect_report segv_bug "^cmrun: fault report: 0 injected kills, 2 other rank failures, 1 restart over 1 rank, 0 cmserver failures$" &&
		expect_report segv_bug "^cmrun:   rank 1: 2 failures \(first: killed by signal SIGSEGV\); 1 restart \(0 from an image, 1 from the start\); back in MPI_Init [0-9.]+ s after its failure$"'
fi

ASAN_OPTIONS=$SEGV_ASAN FAULTS_SEGV=1:3 FAULTS_ONCE=1 ft_same segv_once ref -- ft_faults "$STEPS"
if itest_selected segv_once; then
	check segv_once_report "no fault report naming the SIGSEGV" \
		expect_report segv_once "^cmrun:   rank 1: 1 failure \(killed by signal SIGSEGV\); 1 restart \(0 from an image, 1 from the start\)"
fi

FAULTS_SLEEP_MS=100 ft_same kill_report ref --kill-at 2:300ms -- ft_faults "$STEPS"
if itest_selected kill_report; then
	check kill_report_lines "fault report lines" eval '
		expect_report kill_report "^cmrun: fault report: 1 injected kill, 0 other rank failures, 1 restart over 1 rank, 0 cmserver failures$" &&
		expect_report kill_report "^cmrun:   rank 2: 1 injected kill; 1 restart \(0 from an image, 1 from the start\); back in MPI_Init [0-9.]+ s after its failure$" &&
		expect_report kill_report "^cmrun:   replayed by the channel memories: [0-9]+ messages?, [0-9]+ events?$"'
fi

ft_same clean ref -- ft_faults "$STEPS"
if itest_selected clean; then
	check clean_no_report "a fault report on a run without faults" test ! -s "$itest_work/clean.report"
fi

# A CM killed from outside, by pid: one carrying this job's marker
# (lib.sh puts CHANMEM_ITEST_MARK=NAME.$$.* in the job's environment).
kill_one_cm() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = cmserver ] || continue
		if tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -q "^CHANMEM_ITEST_MARK=$1\.$$\."; then
			kill -KILL "${p#/proc/}"
			return
		fi
	done
}
if itest_selected cm_dies; then
	(
		sleep 1.5
		kill_one_cm cm_dies
	) &
	killer=$!
	FAULTS_SLEEP_MS=200 itest_run cm_dies 4 --cms 2 -- ft_faults 40
	wait "$killer"
	check cm_dies "exit $itest_rc, expected 1 with the CM named first" eval '
		test "$itest_rc" -eq 1 &&
		head -n 1 "$itest_work/cm_dies.err" | grep -Eq "^cmrun: cmserver [01] \(pid [0-9]+\) killed by signal SIGKILL during the run; stopping the job$" &&
		! grep -q "^cmrun: rank" "$itest_work/cm_dies.err" &&
		expect_report cm_dies "^cmrun:   cmserver [01] killed by signal SIGKILL during the run$"'
fi

ft_ref ref20 -- ft_faults 20
FAULTS_SLEEP_MS=100 ft_same kill_rank ref20 --kill-every 300ms --kill-rank 1 -- ft_faults 20
if itest_selected kill_rank; then
	check kill_rank_count "default --kill-count with --kill-rank: 3 kills" \
		expect_report kill_rank "^cmrun:   rank 1: 3 injected kills; 3 restarts"
fi

for k in 0 1; do
	FAULTS_SLEEP_MS=100 ft_same "repl_quiet_$k" ref --replicate 2 --kill-replica "$k" \
		--kill-at 0:300ms -- ft_faults "$STEPS"
done

if itest_selected ckpt_resume; then
	mkdir -p "$itest_work/ck"
	FAULTS_CKPT=1 FAULTS_KILL=1:4 FAULTS_SLEEP_MS=20 itest_run ckpt_resume "$NP" --tag-output \
		--ckpt-dir "$itest_work/ck" -- ft_faults "$STEPS"
	# The reference plus exactly the new line, every other line once.
	{ cat "$itest_work/ref.sorted"; echo "[1] rank 1 resuming from step 4"; } |
		sort -s -k1,1 >"$itest_work/ckpt_resume.want"
	check ckpt_resume "exit $itest_rc; output not the reference plus the resuming line" eval '
		test "$itest_rc" -eq 0 && diff -u <(sort -s -k1,1 "$itest_work/ckpt_resume.want" | sort) \
			<(ft_sorted ckpt_resume | sort) &&
		expect_report ckpt_resume "1 restart \(1 from an image, 0 from the start\)"'
fi

# vary_case NAME KILL_STEP VARY_FROM:VARY_TO RESUMING [FAULTS_CKPT]: rank 1
# raises SIGKILL after printing step KILL_STEP; the lines of the steps in
# VARY carry the incarnation that printed them. Want: the reference, those
# lines as printed first (by incarnation 0 up to the kill, 1 after), and
# the line "rank 1 resuming from step RESUMING" (-1: none) once.
vary_case() {
	local name=$1 kill=$2 vary=$3 resuming=$4 ckpt=${5:-0}
	itest_selected "$name" || return 0
	mkdir -p "$itest_work/ck_$name"
	FAULTS_CKPT=$ckpt FAULTS_KILL=1:$kill FAULTS_VARY=$vary itest_run "$name" "$NP" \
		--tag-output --ckpt-dir "$itest_work/ck_$name" -- ft_faults "$STEPS"
	{
		awk -v from="${vary%:*}" -v to="${vary#*:}" -v kill="$kill" '
			$4 == "step" && $5 >= from && $5 <= to {
				$0 = $0 " (incarnation " ($3 == 1 && $5 > kill ? 1 : 0) ")"
			} { print }' "$itest_work/ref.sorted"
		[ "$resuming" -lt 0 ] || echo "[1] rank 1 resuming from step $resuming"
	} | sort >"$itest_work/$name.want"
	check "$name" "exit $itest_rc; output not the reference with the lines as printed first" eval '
		test "$itest_rc" -eq 0 &&
		diff -u "$itest_work/$name.want" <(sort "$itest_work/$name.out")'
}
# The last line before the kill (NPcm under ASan printed it twice).
vary_case vary_last 3 3:3 -1
vary_case vary_two 5 2:3 -1
vary_case vary_all 3 0:7 -1
# Restored from the image of step 3: the line it adds, then the old ones.
vary_case vary_ckpt_last 4 4:4 4 1
vary_case vary_ckpt_first 5 3:3 3 3
vary_case vary_ckpt_end 5 4:5 3 3

itest_finish
