#!/bin/bash
# Much output from many ranks arrives complete: every line, every byte, on
# both streams, also when the reader of cmrun's output is slow (cmrun then
# holds the ranks back instead of dropping or buffering without bound).
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"

# Rank R writes N lines "R K" padded to 100 bytes on stdout, and every
# tenth also on stderr.
GEN='BEGIN { r = ENVIRON["CHANMEM_RANK"]; pad = "."; while (length(pad) < 100) pad = pad pad
	for (k = 1; k <= n; k++) {
		s = substr(r " " k " " pad, 1, 99); print s
		if (k % 10 == 0) print s > "/dev/stderr"
	} }'

check() { # FILE NRANKS NLINES-PER-RANK
	[ "$(wc -l <"$1")" = $(($2 * $3)) ] || fail "$1: $(wc -l <"$1") lines, want $(($2 * $3))"
	[ "$(wc -c <"$1")" = $(($2 * $3 * 100)) ] || fail "$1: $(wc -c <"$1") bytes, want $(($2 * $3 * 100))"
	awk -v nranks="$2" -v n="$3" '
		length($0) != 99 { bad++ }
		{ if ($2 <= last[$1]) disorder++; last[$1] = $2; seen[$1]++ }
		END {
			for (r = 0; r < nranks; r++) if (seen[r] != n) missing++
			if (bad || disorder || missing) { print bad, disorder, missing; exit 1 }
		}' "$1" || fail "$1: lines cut, reordered or lost"
}

note "16 ranks, 20000 lines each, as fast as they can"
run_cmrun -n 16 --transport direct awk -v n=20000 "$GEN"
expect_status 0 "bulk"
check "$T/out" 16 20000
check "$T/err" 16 2000

note "the same through a slow reader"
{
	timeout -s KILL "$RUN_LIMIT" "$CMRUN" -n 16 --transport direct awk -v n=20000 "$GEN" \
		2>"$T/err" </dev/null
	echo $? >"$T/rc"
} | {
	sleep 2
	cat >"$T/out"
}
rc=$(cat "$T/rc")
expect_status 0 "slow reader"
check "$T/out" 16 20000
check "$T/err" 16 2000
finish
