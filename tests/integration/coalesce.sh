#!/bin/bash
# Send coalescing of the cm transport (client/transport_cm_coalesce.c): small
# sends queued to leave with the next frame still arrive, in order, whatever
# the program does next. programs/coalesce runs a ping-pong, a stream of
# back-to-back sends, and a send after which rank 0 stops calling MPI until
# rank 1 has the message (only the flusher thread can write it). Run with
# coalescing on (the default), with the counts printed (the sends were
# queued, the silent one written late by the flusher, queuing paused after
# it), off, and with bad CHANMEM_COALESCE_US / _PROMPT_US values.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup

# coalesce_counts NAME: "QUEUED LATE PAUSED" from rank 0's statistics line on stderr.
coalesce_counts() {
	sed -n 's/.*rank 0: \([0-9]*\) sends queued to leave with the next frame, \([0-9]*\) written late by the flusher, \([0-9]*\) times queuing paused.*/\1 \2 \3/p' \
		"$itest_work/$1.err"
}

# coalesce_stats NAME MIN_QUEUED MAX_QUEUED MIN_LATE MIN_PAUSED: output as expected, rank 0's
# counts in range.
coalesce_stats() {
	local name=$1 min_queued=$2 max_queued=$3 min_late=$4 min_paused=$5
	itest_selected "$name" || return 0
	local clean=0
	CHANMEM_COALESCE_STATS=1 itest_run "$name" 2 --transport cm -- coalesce "$itest_work/$name.flag" || clean=1
	local counts queued late paused
	counts=$(coalesce_counts "$name")
	read -r queued late paused <<<"$counts"
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
	elif [ "$paused" -lt "$min_paused" ]; then
		itest_fail "$name" "queuing paused $paused times, expected at least $min_paused"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

# Defaults: sends are queued, and queuing pauses at least once: the silent
# send waits past the prompt limit (or queuing had already paused earlier,
# when a flush came late on this shared machine).
coalesce_stats coalesce_on 1 701 0 1
itest_expect_success coalesce_on_quiet coalesce 2 --transport cm -- coalesce "$itest_work/coalesce_on_quiet.flag"
# A 100 ms window and prompt limit: the first ping-pong and most of the
# stream are queued whatever the machine's load, and only the flusher can
# have written the silent send.
CHANMEM_COALESCE_US=100000 CHANMEM_COALESCE_PROMPT_US=100000 coalesce_stats coalesce_flusher 300 701 1 1
# Off: every send is written at once.
CHANMEM_COALESCE_US=0 coalesce_stats coalesce_off 0 0 0 0
CHANMEM_COALESCE_US=0 itest_expect_success coalesce_off_quiet coalesce 2 --transport cm -- coalesce "$itest_work/coalesce_off_quiet.flag"
CHANMEM_COALESCE_US=abc itest_expect_failure coalesce_bad_value 1 "CHANMEM_COALESCE_US 'abc': expected microseconds" \
	2 --transport cm -- coalesce "$itest_work/coalesce_bad.flag"
CHANMEM_COALESCE_US=100001 itest_expect_failure coalesce_too_long 1 "CHANMEM_COALESCE_US '100001'" \
	2 --transport cm -- coalesce "$itest_work/coalesce_long.flag"
CHANMEM_COALESCE_PROMPT_US=-1 itest_expect_failure coalesce_bad_prompt 1 "CHANMEM_COALESCE_PROMPT_US '-1'" \
	2 --transport cm -- coalesce "$itest_work/coalesce_prompt.flag"

itest_finish
