#!/bin/bash
# The example of docs/checkpointing.md, taken from the document and run with
# the command printed there: the killed ranks must resume from images (a
# step past 0), and the final lines must be those of a run without kills.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
need_cmserver
[ -x "$CMCC" ] || skip "cmcc not built (CMCC='$CMCC')"
[ -x "$CKPTSERVER_BIN" ] || skip "ckptserver not built"
CHANMEM_CKPTSERVER=$CKPTSERVER_BIN
export CHANMEM_CKPTSERVER
doc="$DOCSRC/checkpointing.md"

# The second C block is the program (the first is the API summary).
awk '/^```c$/ { n++; if (n == 2) { f = 1; next } } /^```$/ { if (f) exit } f' "$doc" >"$T/ring.c"
grep -q 'chanmem_checkpoint' "$T/ring.c" || fail "no example program found in $doc"
# The run line as printed, with its /tmp/ck made private to this test.
line=$(grep -m 1 '^cmrun .*--kill-every' "$doc") || fail "no cmrun line in $doc"
read -r -a args <<<"${line#cmrun }"
for i in "${!args[@]}"; do
	[ "${args[$i]}" = /tmp/ck ] && args[$i]=$T/ck
done
cd "$T" || itest_hard_error "cd $T"
"$CMCC" -Wall -Wextra -Werror -o ring ring.c || fail "cmcc -o ring ring.c"

run_cmrun -n 4 ./ring
expect_status 0 "the example without kills"
sort "$T/out" >"$T/ref"
[ "$(wc -l <"$T/ref")" = 4 ] || fail "without kills: $(cat "$T/out")"

run_cmrun "${args[@]}"
expect_status 0 "$line"
grep -v 'resumed at step' "$T/out" | sort >"$T/got"
cmp -s "$T/ref" "$T/got" ||
	fail "final lines differ from the run without kills: $(diff "$T/ref" "$T/got")"
kills=$(grep -c -- '--kill-every: SIGKILL' "$T/err")
[ "$kills" -ge 1 ] || fail "nobody was killed: $(tail -5 "$T/err")"
images=$(grep -c 'resumed from checkpoint image' "$T/err")
[ "$images" -ge 1 ] || fail "no rank resumed from an image: $(grep -i restart "$T/err")"
grep -q '^rank [0-3]: resumed at step [1-9]' "$T/out" ||
	fail "no rank printed a resumption past step 0: $(cat "$T/out")"
itest_log "$kills kills, $images restarts from an image"
finish
