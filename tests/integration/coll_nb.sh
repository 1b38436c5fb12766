#!/bin/bash
# Non-blocking collectives (programs/coll_nb): each one's result equals its
# blocking twin's, overlapped with polling computation, several at once on
# two communicators, on 1, 3 and 4 ranks over the direct transport, one and
# three channel memories and replication; then under kills, where the
# output must equal the failure-free run's: a rank killed at three points
# of the program (re-executed, its coroutines resumed at the logged
# points), by cmrun --kill-at, and by cmrun's seeded --kill-every on
# whichever ranks it picks (some killed again while they replay), over one,
# two and three CMs, with every message below --cut-through-min (the
# default) and with the large ones above it (cut through the CM); under
# --replicate 2, a master or a non-master replica killed by cmrun.
here=$(dirname "$0")
ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-90s}
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

itest_expect_success coll_nb_direct_1 coll_nb 1 --transport direct -- coll_nb
# One rank over a CM: its MPI_Test outcomes are the last frames it queues,
# and MPI_Finalize must still send them and end.
itest_expect_success coll_nb_cm_1 coll_nb 1 --transport cm -- coll_nb
for n in 3 4; do
	itest_expect_success "coll_nb_direct_$n" coll_nb "$n" --transport direct -- coll_nb
	itest_expect_success "coll_nb_cm_$n" coll_nb "$n" --transport cm -- coll_nb
done
itest_expect_success coll_nb_cm3_4 coll_nb 4 --transport cm --cms 3 -- coll_nb
CHANMEM_TEST_MODE= itest_expect_success coll_nb_repl2_3 coll_nb 3 --replicate 2 -- coll_nb

NP=4
ROUNDS=4
ft_ref coll_nb_ref -- coll_nb "$ROUNDS"
for at in 0 1 2; do
	CNB_KILL_AT=$at ft_same "coll_nb_kill_$at" coll_nb_ref -- coll_nb "$ROUNDS"
done
CNB_KILL_AT=1 ft_same coll_nb_kill_cms2 coll_nb_ref --cms 2 -- coll_nb "$ROUNDS"
ft_same coll_nb_kill_at coll_nb_ref --kill-at 2:150ms -- coll_nb "$ROUNDS"

# Random kills land anywhere: inside a coroutine's step, between a point
# and the frame after it, during a replay. Each seed picks other ranks.
for seed in 1 2 3 4; do
	ft_same "coll_nb_every_seed$seed" coll_nb_ref --kill-every 120ms --kill-count 3 \
		--seed "$seed" -- coll_nb "$ROUNDS"
done
ft_same coll_nb_every_cms2 coll_nb_ref --cms 2 --kill-every 120ms --kill-count 3 --seed 5 -- \
	coll_nb "$ROUNDS"
# 12-byte messages stay below --cut-through-min 64, the 20-80 KB ones go
# above it.
for seed in 6 7; do
	ft_same "coll_nb_every_cut_seed$seed" coll_nb_ref --cut-through-min 64 --kill-every 120ms \
		--kill-count 3 --seed "$seed" -- coll_nb "$ROUNDS"
done
ft_same coll_nb_every_cms3_cut coll_nb_ref --cms 3 --cut-through-min 64 --kill-every 120ms \
	--kill-count 3 --seed 8 -- coll_nb "$ROUNDS"

# Replication: a replica follows its master's steps and marks as they
# come (waiting for a mark it needs); the master killed (a replica takes
# over, following the records it has, then leading) or the other replica.
NP=3
CHANMEM_TEST_MODE= ft_ref coll_nb_repl_ref --replicate 2 -- coll_nb "$ROUNDS"
for rep in 0 1; do
	CHANMEM_TEST_MODE= ft_same "coll_nb_repl_kill_replica$rep" coll_nb_repl_ref --replicate 2 \
		--kill-at 1:200ms --kill-replica "$rep" -- coll_nb "$ROUNDS"
done

itest_finish
