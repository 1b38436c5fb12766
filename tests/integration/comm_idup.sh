#!/bin/bash
# MPI_Comm_idup (programs/comm_idup): several idups pending at once, over
# computation that polls and over blocking MPI_Comm_split and
# MPI_Comm_dup on other communicators, then their results used for
# collectives and for point-to-point messages that would cross between
# communicators sharing a context. On 4 ranks over the direct transport,
# one and three channel memories, every cmserver mode and --replicate 2
# (output compared with comm_idup.expected), on 1 and 3 ranks (cm against
# direct); then under kills, where the output must equal the failure-free
# run's: a rank killed while its idups are pending (re-executed, the
# idups' steps replayed at the logged points), cmrun --kill-at, cmrun's
# seeded --kill-every over one and two CMs and in every cmserver mode, and
# a master or a non-master replica killed under --replicate 2.
here=$(dirname "$0")
ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-90s}
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

MODES="mono thread-per-client multiplexer specialized"

itest_expect_success comm_idup_direct comm_idup 4 --transport direct -- comm_idup
itest_expect_success comm_idup_cm comm_idup 4 --transport cm -- comm_idup
itest_expect_success comm_idup_cm3 comm_idup 4 --transport cm --cms 3 -- comm_idup
for mode in $MODES; do
	CHANMEM_CM_THREADS=2 itest_expect_success "comm_idup_$mode" comm_idup 4 --transport cm \
		--mode "$mode" -- comm_idup
done
CHANMEM_TEST_MODE= itest_expect_success comm_idup_repl2 comm_idup 4 --replicate 2 -- comm_idup
for NP in 1 3; do
	ft_ref "comm_idup_direct_$NP" --transport direct -- comm_idup
	ft_same "comm_idup_cm_$NP" "comm_idup_direct_$NP" --transport cm --cms 2 -- comm_idup
done

# Long enough (about half a second failure-free) for three kills.
NP=4
ROUNDS=150
ft_ref comm_idup_ref -- comm_idup "$ROUNDS"
for at in 0 3; do
	CID_KILL_AT=$at ft_same "comm_idup_kill_$at" comm_idup_ref -- comm_idup "$ROUNDS"
done
CID_KILL_AT=2 ft_same comm_idup_kill_cms2 comm_idup_ref --cms 2 -- comm_idup "$ROUNDS"
ft_same comm_idup_kill_at comm_idup_ref --kill-at 2:150ms -- comm_idup "$ROUNDS"
for seed in 1 2 3; do
	ft_same "comm_idup_every_seed$seed" comm_idup_ref --kill-every 120ms --kill-count 3 \
		--seed "$seed" -- comm_idup "$ROUNDS"
done
ft_same comm_idup_every_cms2 comm_idup_ref --cms 2 --kill-every 120ms --kill-count 3 --seed 4 \
	-- comm_idup "$ROUNDS"
seed=5
for mode in $MODES; do
	CHANMEM_CM_THREADS=2 ft_same "comm_idup_every_$mode" comm_idup_ref --mode "$mode" \
		--kill-every 120ms --kill-count 3 --seed "$seed" -- comm_idup "$ROUNDS"
	seed=$((seed + 1))
done

# Replication: a replica follows its master's steps and marks; the master
# killed (a replica takes over) or the other replica.
NP=3
CHANMEM_TEST_MODE= ft_ref comm_idup_repl_ref --replicate 2 -- comm_idup "$ROUNDS"
for rep in 0 1; do
	CHANMEM_TEST_MODE= ft_same "comm_idup_repl_kill_replica$rep" comm_idup_repl_ref \
		--replicate 2 --kill-at 1:200ms --kill-replica "$rep" -- comm_idup "$ROUNDS"
done

itest_finish
