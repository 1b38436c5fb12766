#!/bin/bash
# Inter-communicators (programs/intercomm): MPI_Intercomm_create between the
# even and the odd ranks, point-to-point by remote rank, every collective an
# inter-communicator takes (checked against a local computation),
# MPI_Intercomm_merge, MPI_Comm_dup, a second inter-communicator with other
# leaders. The expected outputs come from the same program run under Open
# MPI: on 3, 4 and 5 ranks over the direct transport, one and three channel
# memories, every cmserver mode and --replicate 2; on 2 and 7 ranks, cm
# against direct. Then under kills, where the output must equal the
# failure-free run's: a rank killed in the middle of a round (re-executed:
# the creation's agreement and the collectives replayed from the log),
# cmrun's seeded --kill-every over one and two CMs and in every cmserver
# mode, with messages below and above --cut-through-min, and a master or a
# non-master replica killed under --replicate 2. Checkpoints with
# inter-communicators in use: ft_coll.sh.
here=$(dirname "$0")
ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-90s}
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

MODES="mono thread-per-client multiplexer specialized"

for np in 3 4 5; do
	exp=intercomm_$np
	itest_expect_success "intercomm_direct_$np" "$exp" "$np" --transport direct -- intercomm
	itest_expect_success "intercomm_cm_$np" "$exp" "$np" --transport cm -- intercomm
done
itest_expect_success intercomm_cm3 intercomm_4 4 --transport cm --cms 3 -- intercomm
for mode in $MODES; do
	CHANMEM_CM_THREADS=2 itest_expect_success "intercomm_$mode" intercomm_5 5 --transport cm \
		--mode "$mode" -- intercomm
done
CHANMEM_TEST_MODE= itest_expect_success intercomm_repl2 intercomm_4 4 --replicate 2 -- intercomm
for NP in 2 7; do
	ft_ref "intercomm_direct_np$NP" --transport direct -- intercomm
	ft_same "intercomm_cm_np$NP" "intercomm_direct_np$NP" --transport cm --cms 2 -- intercomm
done

# Long enough (about half a second failure-free) for three kills; 1000
# ints a buffer, and 80000 (320 KB: above --cut-through-min).
NP=5
ROUNDS=150
BIG_ROUNDS=12
ft_ref ic_ref -- intercomm "$ROUNDS"
ft_ref ic_ref_big -- intercomm "$BIG_ROUNDS" 80000
for at in 0 7; do
	IC_KILL_AT=$at ft_same "intercomm_kill_$at" ic_ref -- intercomm "$ROUNDS"
done
IC_KILL_AT=3 ft_same intercomm_kill_big ic_ref_big -- intercomm "$BIG_ROUNDS" 80000
IC_KILL_AT=2 ft_same intercomm_kill_cms2 ic_ref --cms 2 -- intercomm "$ROUNDS"
for seed in 1 2; do
	ft_same "intercomm_every_seed$seed" ic_ref --kill-every 120ms --kill-count 3 \
		--seed "$seed" -- intercomm "$ROUNDS"
done
ft_same intercomm_every_cms2 ic_ref --cms 2 --kill-every 120ms --kill-count 3 --seed 3 \
	-- intercomm "$ROUNDS"
seed=4
for mode in $MODES; do
	CHANMEM_CM_THREADS=2 ft_same "intercomm_every_$mode" ic_ref --mode "$mode" \
		--kill-every 120ms --kill-count 3 --seed "$seed" -- intercomm "$ROUNDS"
	CHANMEM_CM_THREADS=2 ft_same "intercomm_every_big_$mode" ic_ref_big --mode "$mode" \
		--kill-every 150ms --kill-count 2 --seed "$seed" -- intercomm "$BIG_ROUNDS" 80000
	seed=$((seed + 1))
done

# Replication: a replica follows its master; the master killed (a replica
# takes over) or the other replica.
NP=3
CHANMEM_TEST_MODE= ft_ref ic_repl_ref --replicate 2 -- intercomm "$ROUNDS"
for rep in 0 1; do
	CHANMEM_TEST_MODE= ft_same "intercomm_repl_kill_replica$rep" ic_repl_ref \
		--replicate 2 --kill-at 1:150ms --kill-replica "$rep" -- intercomm "$ROUNDS"
done

itest_finish
