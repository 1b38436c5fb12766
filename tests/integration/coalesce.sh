#!/bin/bash
# Send coalescing of the cm transport (client/transport_cm_coalesce.c): small
# sends queued to leave with the next frame still arrive, in order, whatever
# the program does next. programs/coalesce runs a ping-pong, a stream of
# back-to-back sends, and a send after which rank 0 stops calling MPI until
# rank 1 has the message (only the flusher thread can write it). Run with
# coalescing on (the default), with the counts printed (the sends were
# queued, the silent one written late by the flusher), off, and with a bad
# CHANMEM_COALESCE_US.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup

# coalesce_counts NAME: "Q L" from rank 0's statistics line on stderr.
coalesce_counts() {
	sed -n 's/.*rank 0: \([0-9]*\) sends queued to leave with the next frame, \([0-9]*\) written late by the flusher.*/\1 \2/p' \
		"$itest_work/$1.err"
}

# coalesce_stats NAME MIN_QUEUED MIN_LATE MAX_QUEUED: output as expected and rank 0's counts in range.
coalesce_stats() {
	local name=$1 min_queued=$2 min_late=$3 max_queued=$4
	itest_selected "$name" || return 0
	local clean=0
	CHANMEM_COALESCE_STATS=1 itest_run "$name" 2 --transport cm -- coalesce "$itest_work/$name.flag" || clean=1
	local counts queued late
	counts=$(coalesce_counts "$name")
	read -r queued late <<<"$counts"
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! diff -u "$ITEST_EXPECTED_DIR/coalesce.expected" "$itest_work/$name.out" >"$itest_work/$name.diff"; then
		itest_fail "$name" "stdout differs from coalesce.expected:"
		sed 's/^/    /' "$itest_work/$name.diff"
	elif [ -z "$counts" ]; then
		itest_fail "$name" "no statistics line from rank 0"
	elif [ "$queued" -lt "$min_queued" ] || [ "$queued" -gt "$max_queued" ]; then
		itest_fail "$name" "rank 0 queued $queued sends, expected $min_queued .. $max_queued"
	elif [ "$late" -lt "$min_late" ]; then
		itest_fail "$name" "the flusher wrote $late messages late, expected at least $min_late"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

# On: most of rank 0's 701 sends wait for the next frame (some go at once
# after a late flush, and when a batch is full); the silent one is written by
# the flusher.
coalesce_stats coalesce_on 300 1 701
itest_expect_success coalesce_on_quiet coalesce 2 --transport cm -- coalesce "$itest_work/coalesce_on_quiet.flag"
# Off: every send is written at once.
CHANMEM_COALESCE_US=0 coalesce_stats coalesce_off 0 0 0
CHANMEM_COALESCE_US=0 itest_expect_success coalesce_off_quiet coalesce 2 --transport cm -- coalesce "$itest_work/coalesce_off_quiet.flag"
CHANMEM_COALESCE_US=abc itest_expect_failure coalesce_bad_value 1 "CHANMEM_COALESCE_US 'abc': expected microseconds" \
	2 --transport cm -- coalesce "$itest_work/coalesce_bad.flag"
CHANMEM_COALESCE_US=100001 itest_expect_failure coalesce_too_long 1 "CHANMEM_COALESCE_US '100001'" \
	2 --transport cm -- coalesce "$itest_work/coalesce_long.flag"

itest_finish
