#!/bin/bash
# The collectives across the cost model's switch points (programs/coll_switch:
# sizes about 1.15 apart from 1 B to 300 KB, a non-commutative user op,
# against a reference computation) on 3, 4, 5, 6, 7 and 8 ranks over the
# direct transport and one CM, on 5 and 7 ranks over three CMs; then on 5
# ranks under cmrun's seeded --kill-every (ranks killed anywhere, some while
# they replay) and --kill-at, where every rank's digest of its results must
# equal the failure-free run's.
here=$(dirname "$0")
ITEST_JOB_TIMEOUT=${ITEST_JOB_TIMEOUT:-120s}
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup
itest_log "collective switch points (launcher $ITEST_LAUNCHER)"

for n in 3 4 5 6 7 8; do
	itest_expect_success "coll_switch_direct_$n" coll_switch "$n" --transport direct -- coll_switch
	itest_expect_success "coll_switch_cm_$n" coll_switch "$n" --transport cm -- coll_switch
done
for n in 5 7; do
	itest_expect_success "coll_switch_cm3_$n" coll_switch "$n" --transport cm --cms 3 -- coll_switch
done

NP=5
ft_ref coll_switch_ref -- coll_switch -d
for seed in 1 2; do
	ft_same "coll_switch_every_seed$seed" coll_switch_ref --kill-every 150ms --kill-count 2 \
		--seed "$seed" -- coll_switch -d
done
ft_same coll_switch_every_cms2 coll_switch_ref --cms 2 --kill-every 150ms --kill-count 2 \
	--seed 3 -- coll_switch -d
ft_same coll_switch_kill_at coll_switch_ref --kill-at 2:200ms -- coll_switch -d

itest_finish
