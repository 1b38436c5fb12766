#!/bin/bash
# The fault-tolerance scenarios against one cmserver mode (the one
# CHANMEM_TEST_MODE names, else the default; ft_modes.sh runs every mode):
# a ring, a master/worker on MPI_ANY_SOURCE, 8 MiB messages, and NPcm, each
# failure-free and with kills -- one kill, the same rank twice in a row, two
# ranks at once, a kill in the middle of an 8 MiB transfer, a kill of a rank
# while it is itself being replayed, cmrun's random kills. Every killed run
# must end with exactly the failure-free output (programs/ft_suite checks
# every byte it receives). Control flow on MPI_Wtime: ft_wtime.sh.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
RING=30 MASTER=8 BIG=5

ft_ref_for "ft_sc_ring_once ft_sc_ring_twice ft_sc_ring_two_at_once ft_sc_ring_during_replay" \
	ft_ref_ring -- ft_suite ring $RING
ft_ref_for "ft_sc_master_master ft_sc_master_worker ft_sc_master_two_twice ft_sc_master_random" \
	ft_ref_master -- ft_suite master $MASTER
ft_ref_for "ft_sc_big_mid_transfer ft_sc_big_two_at_once" ft_ref_big -- ft_suite big $BIG

FT_KILL_RANK=1 FT_KILL_AT=15 ft_same ft_sc_ring_once ft_ref_ring -- ft_suite ring $RING
FT_KILL_RANK=2 FT_KILL_AT=10 FT_KILL_TIMES=2 ft_same ft_sc_ring_twice ft_ref_ring -- \
	ft_suite ring $RING
FT_KILL_RANK=1,2 FT_KILL_AT=12 ft_same ft_sc_ring_two_at_once ft_ref_ring -- \
	ft_suite ring $RING
# Incarnation 1 dies at iteration 6 while re-executing up to 20 from the log.
FT_KILL_RANK=3 FT_KILL_AT=20 FT_REKILL_AT=6 ft_same ft_sc_ring_during_replay ft_ref_ring -- \
	ft_suite ring $RING

FT_KILL_RANK=0 FT_KILL_AT=4 ft_same ft_sc_master_master ft_ref_master -- ft_suite master $MASTER
FT_KILL_RANK=2 FT_KILL_AT=3 ft_same ft_sc_master_worker ft_ref_master -- ft_suite master $MASTER
FT_KILL_RANK=0,3 FT_KILL_AT=5 FT_KILL_TIMES=2 ft_same ft_sc_master_two_twice ft_ref_master -- \
	ft_suite master $MASTER
FT_SLEEP_MS=20 ft_same ft_sc_master_random ft_ref_master --kill-every 100ms --kill-count 3 \
	--seed 7 -- ft_suite master $MASTER

# Killed with its 8 MiB send under way (and its neighbour's 8 MiB to it).
FT_KILL_RANK=1 FT_KILL_AT=2 ft_same ft_sc_big_mid_transfer ft_ref_big -- ft_suite big $BIG
FT_KILL_RANK=0,2 FT_KILL_AT=3 ft_same ft_sc_big_two_at_once ft_ref_big -- ft_suite big $BIG

# NPcm under cmrun's random kills, every buffer verified (NPcm aborts on a
# wrong or missing byte); its repeat counts come from MPI_Wtime, replayed.
name=ft_sc_npcm_kill_every
NPCM=${NPCM:-$(dirname "$CMRUN")/../netpipe/NPcm}
if ! itest_selected $name; then
	:
elif [ ! -x "$NPCM" ]; then
	itest_log "SKIP: $name: NPcm not built ($NPCM)"
else
	clean=0
	itest_run $name 2 -v --kill-every 300ms --kill-count 3 --seed 5 -- \
		"$(realpath --relative-to="$PROGDIR" "$NPCM")" -u 262144 -t 0.005 -T 1 \
		-o "$itest_work/np.out" || clean=1
	restarts=$(grep -c "restarting it as incarnation" "$itest_work/$name.err")
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail $name "exit status $itest_rc, expected 0"
		grep -v '^cmrun: ' "$itest_work/$name.err" | head -n 5 | sed 's/^/    /'
	elif [ "$restarts" -lt 1 ]; then
		itest_fail $name "no rank was killed and restarted"
	elif [ "$(wc -l <"$itest_work/np.out")" -lt 10 ]; then
		itest_fail $name "np.out has $(wc -l <"$itest_work/np.out") lines"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

itest_finish
