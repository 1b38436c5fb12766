#!/bin/bash
# The applications of tests/apps (docs/apps.md) under cmrun: jacobi,
# samplesort and cg, each checking its own answer.
#
# 1. Failure-free, on 1, 3, 4 and 7 ranks, over the direct transport and
#    over cm with one and with two channel memories: exit 0, nothing on
#    stderr, and the application's result line equal to the one Open MPI
#    gives (it does not depend on the rank count; the values below were
#    taken from runs of the same sources built with mpicc). Each run is
#    also the reference of the killed runs of its configuration.
# 2. With kills under cm: ranks that kill themselves at a chosen step on
#    their first incarnation(s) (FT_KILL_RANK/FT_KILL_AT/FT_KILL_TIMES,
#    tests/apps/app_common.h), and cmrun's seeded --kill-every. The output,
#    per rank (--tag-output), must be the failure-free run's, byte for byte,
#    with exit 0, the restarts seen in cmrun -v, and nothing left behind.
# 3. An existing collective test program (programs/coll_reduce, every
#    reduction op; deterministic, rank 0 prints) under --kill-every.
#
# APPS_OMPI=1 also builds the applications with Open MPI's mpicc and checks
# their result lines under mpirun (not in make check: mpirun listens beyond
# the loopback interface).
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"

if [ "$ITEST_LAUNCHER" != cmrun ]; then
	echo "apps.sh runs under cmrun only (APPS_OMPI=1 adds the Open MPI cross-check)"
	exit 77
fi
itest_setup

APPDIR=$(dirname "$PROGDIR")/apps
for app in jacobi samplesort cg; do
	[ -x "$APPDIR/$app" ] || itest_hard_error "$APPDIR/$app not built"
done

# The result lines with the default sizes, as Open MPI 4 prints them.
declare -A RESULT=(
	[jacobi]="jacobi: result: 32x32, converged after 660 sweeps, field sum 2.535778830691e+04, equal to the serial computation: ok"
	[samplesort]="samplesort: result: 4 rounds of 200000 keys, combined digest 60ca1c2508f5245f: ok"
	[cg]="cg: result: 1600 unknowns, relative residual below 1e-10, largest error against the known solution below 1e-06: ok"
)

# The result line of a job's output, without its rank tag.
apps_result() {
	sed -n 's/^\[[0-9]*\] \(.*: result: .*\)$/\1/p' "$itest_work/$1.out"
}

# apps_run NAME APP NP [cmrun options]: failure-free run, checked, and kept
# (sorted by rank) as the reference of NAME.
apps_run() {
	local name=$1 app=$2 np=$3
	shift 3
	itest_selected "$name" || return 0
	local clean=0
	itest_run "$name" "$np" --tag-output "$@" -- "../apps/$app" || clean=1
	local got
	got=$(apps_result "$name")
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif [ "$got" != "${RESULT[$app]}" ]; then
		itest_fail "$name" "result line '$got', expected '${RESULT[$app]}'"
	elif [ -s "$itest_work/$name.err" ]; then
		itest_fail "$name" "unexpected output on stderr"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		ft_sorted "$name" >"$itest_work/$name.sorted"
		itest_pass "$name"
	fi
}

# apps_killed NAME REF RESTARTS NP [cmrun options] -- PROGRAM ARGS: a run
# with failures (FT_* from the caller, or cmrun's injection): exit 0, the
# same per-rank output as REF, at least RESTARTS restarts reported by
# cmrun -v, nothing else on stderr, no leftovers.
apps_killed() {
	local name=$1 ref=$2 want=$3 np=$4
	shift 4
	itest_selected "$name" || return 0
	local clean=0
	itest_run "$name" "$np" --tag-output -v "$@" || clean=1
	local restarts
	restarts=$(grep -c "restarting it as incarnation" "$itest_work/$name.err")
	grep -v -e '^cmrun: ' -e '^cmserver: ' "$itest_work/$name.err" >"$itest_work/$name.other"
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif [ ! -f "$itest_work/$ref.sorted" ]; then
		itest_fail "$name" "no reference output ($ref failed)"
	elif ! diff -u "$itest_work/$ref.sorted" <(ft_sorted "$name") >"$itest_work/$name.diff"; then
		itest_fail "$name" "output differs from the failure-free run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif [ "$restarts" -lt "$want" ]; then
		itest_fail "$name" "$restarts restarts, expected at least $want"
	elif [ -s "$itest_work/$name.other" ]; then
		itest_fail "$name" "unexpected output on stderr:"
		head -n 5 "$itest_work/$name.other" | sed 's/^/    /'
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name ($restarts restarts)"
	fi
}

# 1. Failure-free matrix.
for app in jacobi samplesort cg; do
	for np in 1 3 4 7; do
		apps_run "${app}_direct_$np" "$app" "$np" --transport direct
		apps_run "${app}_cm_$np" "$app" "$np" --transport cm
		[ "$np" -gt 1 ] && apps_run "${app}_cm2_$np" "$app" "$np" --cms 2
	done
done

# 2. Kills at chosen steps: one rank; two at once, each twice, through two
# CMs; an odd rank count. Steps: jacobi sweeps (660), samplesort rounds
# (4; between the counts and the data exchange), cg iterations (128).
FT_KILL_RANK=1 FT_KILL_AT=300 \
	apps_killed jacobi_kill1 jacobi_cm_4 1 4 -- ../apps/jacobi
FT_KILL_RANK=0,3 FT_KILL_AT=150 FT_KILL_TIMES=2 \
	apps_killed jacobi_kill2x2_cm2 jacobi_cm2_4 4 4 --cms 2 -- ../apps/jacobi
FT_KILL_RANK=6 FT_KILL_AT=660 \
	apps_killed jacobi_kill_last_7 jacobi_cm2_7 1 7 --cms 2 -- ../apps/jacobi
FT_KILL_RANK=2 FT_KILL_AT=2 \
	apps_killed samplesort_kill1 samplesort_cm_4 1 4 -- ../apps/samplesort
FT_KILL_RANK=0,1 FT_KILL_AT=3 FT_KILL_TIMES=2 \
	apps_killed samplesort_kill2x2_cm2 samplesort_cm2_4 4 4 --cms 2 -- ../apps/samplesort
FT_KILL_RANK=1 FT_KILL_AT=4 \
	apps_killed samplesort_kill_3 samplesort_cm_3 1 3 -- ../apps/samplesort
FT_KILL_RANK=3 FT_KILL_AT=50 \
	apps_killed cg_kill1 cg_cm_4 1 4 -- ../apps/cg
FT_KILL_RANK=1,2 FT_KILL_AT=100 FT_KILL_TIMES=2 \
	apps_killed cg_kill2x2_cm2 cg_cm2_4 4 4 --cms 2 -- ../apps/cg
FT_KILL_RANK=0,5 FT_KILL_AT=1 \
	apps_killed cg_kill_first_7 cg_cm_7 2 7 -- ../apps/cg

# cmrun's random kills, the ranks slowed down so that the kills land
# mid-run (under a second per failure-free run).
FT_SLEEP_MS=1 apps_killed jacobi_every jacobi_cm_4 1 4 --kill-every 150ms --kill-count 3 \
	--seed 11 -- ../apps/jacobi
FT_SLEEP_MS=150 apps_killed samplesort_every samplesort_cm2_4 1 4 --cms 2 --kill-every 150ms \
	--kill-count 3 --seed 12 -- ../apps/samplesort
FT_SLEEP_MS=5 apps_killed cg_every cg_cm_4 1 4 --kill-every 150ms --kill-count 3 \
	--seed 13 -- ../apps/cg

# 3. A collective test program under random kills: its own checks (every
# reduction op, against a sequential computation) and its output must be
# those of the failure-free run.
NP=4
if itest_selected coll_reduce_ref || itest_selected coll_reduce_every; then
	ft_ref coll_reduce_ref -- coll_reduce
fi
apps_killed coll_reduce_every coll_reduce_ref 1 4 --kill-every 50ms --kill-count 3 \
	--seed 21 -- coll_reduce

# Optional: the same sources under Open MPI.
if [ "${APPS_OMPI:-0}" = 1 ] && ! command -v mpicc >/dev/null; then
	itest_log "SKIP: APPS_OMPI=1 but no mpicc"
elif [ "${APPS_OMPI:-0}" = 1 ]; then
	for app in jacobi samplesort cg; do
		name=ompi_$app
		if ! mpicc -O2 -o "$itest_work/$app.ompi" "$TESTSRC/apps/$app.c" \
			"$TESTSRC/apps/app_common.c" -lm 2>"$itest_work/$name.err"; then
			itest_fail "$name" "mpicc failed"
			continue
		fi
		for np in 1 3 4 7; do
			got=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np "$np" \
				"$itest_work/$app.ompi" 2>>"$itest_work/$name.err" | grep ': result: ')
			if [ "$got" = "${RESULT[$app]}" ]; then
				itest_log "PASS: ${name}_$np"
				itest_passes=$((itest_passes + 1))
			else
				echo "mpirun -np $np $app" >"$itest_work/$name.cmd"
				itest_fail "${name}_$np" "result line '$got'"
			fi
		done
	done
fi

itest_finish
