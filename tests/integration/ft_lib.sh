# Helpers for the fault-tolerance scripts (source after lib.sh and itest_setup).
# A job's output is compared with a failure-free reference run of the same
# program: with --tag-output and a stable sort on the tag, each rank's lines
# in their order, which does not depend on how the ranks' lines interleave.
# NP (ranks) is read from the caller.

ft_sorted() {
	sort -s -k1,1 "$itest_work/$1.out"
}

# ft_ref NAME [cmrun options] -- PROGRAM ARGS: the failure-free reference run.
ft_ref() {
	local name=$1
	shift
	itest_run "$name" "$NP" --tag-output "$@"
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "reference run exit status $itest_rc"
		return 1
	fi
	ft_sorted "$name" >"$itest_work/$name.sorted"
	itest_pass "$name"
}

# ft_ref_for "CASE..." NAME [cmrun options] -- PROGRAM ARGS: ft_ref, when
# one of the CASEs that compare with it is selected (ITEST_ONLY, the
# rotation of cases over modes: see lib.sh): a reference run that no case
# reads is time lost. Every CASE is asked about, in order, whatever the
# answers: the rotation numbers the cases in the order they are first
# asked about, which must be the same in every configuration.
ft_ref_for() {
	local cases=$1 c any=0
	shift
	for c in $cases; do
		itest_selected "$c" && any=1
	done
	[ "$any" = 0 ] || ft_ref "$@"
}

# ft_same NAME REF [cmrun options] -- PROGRAM ARGS: exit 0, empty stderr,
# same per-rank output as REF, no leftovers. FT_* come from the caller;
# FT_VERBOSE=1 (the job runs with -v) lets cmrun's, cmserver's and
# ckptserver's own lines through.
ft_same() {
	local name=$1 ref=$2
	shift 2
	itest_selected "$name" || return 0
	local clean=0
	itest_run "$name" "$NP" --tag-output "$@" || clean=1
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
		head -n 5 "$itest_work/$name.err" | sed 's/^/    /'
	elif [ ! -f "$itest_work/$ref.sorted" ]; then
		itest_fail "$name" "no reference output ($ref failed)"
	elif ! diff -u "$itest_work/$ref.sorted" <(ft_sorted "$name") >"$itest_work/$name.diff"; then
		itest_fail "$name" "output differs from the failure-free run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif [ -s "$itest_work/$name.err" ] && { [ "${FT_VERBOSE:-0}" != 1 ] ||
		grep -Evq '^(cmrun|cmserver|ckptserver): ' "$itest_work/$name.err"; }; then
		itest_fail "$name" "unexpected output on stderr:"
		grep -Ev '^(cmrun|cmserver|ckptserver): ' "$itest_work/$name.err" | head -n 5 |
			sed 's/^/    /'
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

# replayed_events NAME: how many events the CMs replayed (cmserver --verbose).
replayed_events() {
	sed -n 's/^cmserver: rank [0-9]*: replaying \([0-9]*\) events.*/\1/p' \
		"$itest_work/$1.err" | awk '{s += $1} END {print s + 0}'
}
