#!/bin/bash
# The MPI-3 everyday calls. programs/mpi_misc (no nondeterminism: info
# objects, handle conversions, MPI_Pcontrol, MPI_Type_match_size, status
# setters, a truncating MPI_Mrecv) over the direct and cm transports,
# output compared with mpi_misc.expected. programs/mprobe (matched probes
# taking messages whose arrival order is timing, a wildcard receive posted
# between a probe and its MPI_Mrecv) over both transports, then under
# kills: rank 0 killed after a round (its probes re-executed and answered
# from the CM's record), cmrun --kill-at, and seeded --kill-every on
# whichever ranks it picks, with one and two CMs. A run is correct when
# every rank knows the same observations and they are rank 0's round
# lines: a re-executed rank 0 that matched other messages would disagree
# with what its dead incarnation had already sent. Then datatype decoding,
# attributes on datatypes, external32 and MPI_Comm_create_group (comments
# at their jobs).
here=$(dirname "$0")
ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-90s}
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

itest_expect_success mpi_misc_direct mpi_misc 2 --transport direct -- mpi_misc
itest_expect_success mpi_misc_cm mpi_misc 2 --transport cm -- mpi_misc

# mprobe_consistent NAME NP: every rank's summary equal, and equal to rank
# 0's round lines.
mprobe_consistent() {
	local out="$itest_work/$1.out" np=$2 lines distinct rounds summary
	lines=$(grep -c '^rank [0-9]* rounds:' "$out")
	[ "$lines" -eq "$np" ] || {
		echo "$lines summary lines, expected $np"
		return 1
	}
	distinct=$(sed -n 's/^rank [0-9]* rounds://p' "$out" | sort -u | wc -l)
	[ "$distinct" -eq 1 ] || {
		echo "ranks disagree on what rank 0 saw:"
		grep '^rank [0-9]* rounds:' "$out" | cut -c 1-200
		return 1
	}
	rounds=$(sed -n 's/^round [0-9]*: \(.*\)$/ \1/p' "$out" | tr -d '\n')
	summary=$(sed -n 's/^rank 0 rounds://p' "$out")
	[ "$rounds" = "$summary" ] || {
		echo "rank 0's round lines differ from its summary"
		return 1
	}
}

ROUNDS=48
# mprobe_job NAME NP KILL_AT [cmrun options]: rank 0 kills itself after
# round KILL_AT; -1: no kill; -2: cmrun kills (at least one restart).
mprobe_job() {
	local name=$1 np=$2 at=$3 clean=0 why
	shift 3
	itest_selected "$name" || return 0
	local self=$at
	[ "$at" -ge -1 ] || self=-1
	MP_KILL_AT=$self itest_run "$name" "$np" "$@" -- mprobe "$ROUNDS" || clean=1
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
		head -n 5 "$itest_work/$name.err" | sed 's/^/    /'
	elif ! why=$(mprobe_consistent "$name" "$np"); then
		itest_fail "$name" "$why"
	elif [ "$at" -ge 0 ] && ! grep -q "rank 0 .*restarting it as incarnation 1" \
		"$itest_work/$name.err"; then
		itest_fail "$name" "rank 0 was not killed and restarted"
	elif [ "$at" -eq -2 ] && ! grep -Eq ' [1-9][0-9]* restarts? over' "$itest_work/$name.report"; then
		itest_fail "$name" "no rank was killed and restarted"
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

mprobe_job mprobe_direct 4 -1 --transport direct
mprobe_job mprobe_direct_2 2 -1 --transport direct
mprobe_job mprobe_cm 4 -1 --transport cm
mprobe_job mprobe_cms2 4 -1 --transport cm --cms 2
for at in 0 20 40; do
	mprobe_job "mprobe_kill_$at" 4 "$at" -v
done
mprobe_job mprobe_kill_cms2 4 25 -v --cms 2
mprobe_job mprobe_kill_at 4 -2 --kill-at 0:60ms
for seed in 1 2 3; do
	mprobe_job "mprobe_every_seed$seed" 4 -2 --kill-every 50ms --kill-count 3 --seed "$seed"
done
mprobe_job mprobe_every_cms2 4 -2 --cms 2 --kill-every 50ms --kill-count 3 --seed 4

# restarted NAME: the job's fault report counts at least one restart.
restarted() {
	grep -Eq ' [1-9][0-9]* restarts? over' "$itest_work/$1.report"
}

# must_restart CHECK NAME ARGS...: CHECK (itest_expect_success or ft_same)
# NAME ARGS..., and a rank was restarted.
must_restart() {
	local check=$1 name=$2 before=$itest_failures
	shift
	itest_selected "$name" || return 0
	"$check" "$@"
	if [ "$itest_failures" -eq "$before" ] && ! restarted "$name"; then
		itest_passes=$((itest_passes - 1))
		itest_fail "$name" "no rank was killed and restarted"
	fi
}

# Datatype decoding: every constructor's envelope and contents, types
# rebuilt from them alone; a struct rebuilt from its contents sends to the
# original. Rank 1 killed after its receive gets the same bytes again.
itest_expect_success dtype_decode_direct dtype_decode 2 --transport direct -- dtype_decode
itest_expect_success dtype_decode_cm dtype_decode 2 --transport cm -- dtype_decode
DD_KILL=1 must_restart itest_expect_success dtype_decode_kill dtype_decode 2 --transport cm -- dtype_decode

# Attributes on datatypes: callbacks on replace, dup, delete and free, a
# failing delete callback, keyval kinds kept apart; a duplicated type in a
# message. Rank 1 killed after its receive does the same again.
itest_expect_success type_attr_direct type_attr 2 --transport direct -- type_attr
itest_expect_success type_attr_cm type_attr 2 --transport cm -- type_attr
TA_KILL=1 must_restart itest_expect_success type_attr_kill type_attr 2 --transport cm -- type_attr

# external32: the standard's bytes for each kind of basic type, long double
# as binary128, a mixed struct packed, unpacked and sent as bytes. Rank 1
# killed after its receive unpacks the same bytes from the log.
itest_expect_success pack_external_direct pack_external 2 --transport direct -- pack_external
itest_expect_success pack_external_cm pack_external 2 --transport cm -- pack_external
PE_KILL=1 must_restart itest_expect_success pack_external_kill pack_external 2 --transport cm -- \
	pack_external

# MPI_Comm_create_group: the odd ranks are busy elsewhere while the even
# ones create theirs; overlapping triples of a shuffled communicator with
# wildcard receives inside. Output equal to the failure-free run (and
# checked inside: members of a triple agree on their wildcard order), also
# with a rank killed mid-way and with seeded kills of any rank.
NP=4
CG_ROUNDS=200
ft_ref ccg_ref --transport cm -- comm_create_group "$CG_ROUNDS"
ft_same ccg_direct ccg_ref --transport direct -- comm_create_group "$CG_ROUNDS"
ft_same ccg_cms2 ccg_ref --cms 2 -- comm_create_group "$CG_ROUNDS"
for victim in 0 3; do
	CG_KILL=$victim must_restart ft_same "ccg_kill_$victim" ccg_ref -- comm_create_group \
		"$CG_ROUNDS"
done
# Long enough (about 0.5 s) for the seeded kills to land whatever the load.
ft_ref ccg_ref_long --transport cm -- comm_create_group 3000
for seed in 1 2; do
	must_restart ft_same "ccg_every_seed$seed" ccg_ref_long --kill-every 40ms --kill-count 3 \
		--seed "$seed" -- comm_create_group 3000
done

itest_finish
