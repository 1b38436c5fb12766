#!/bin/bash
# A cmrun job across the hosts of an emulated cluster: cmrun and the
# channel memories on host 0 (roles=cm), the ranks on hosts 1 to 3, every byte between them
# over veth links through the switch (rate limited to 1 Gbit/s). What a user checks: the
# output is the same as the single-machine run's, exit 0, nothing on stderr, the processes
# ran where the map says, and nothing is left in any host afterwards. The same with both
# CMs killed and restarted (--cm-restart). Then the same over the direct transport (ranks
# connected to each other across hosts).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lib.sh"
netns_setup 4 1gbit

NP=4
ITERS=30
cluster_hostsfile "$netns_hosts" "roles=cm" "slots=2 roles=rank" "slots=2 roles=rank" \
	"slots=2 roles=rank"
h() { cluster_host "$1"; }

# The failure-free references, on one machine (cmrun on host 0, no --hosts).
ft_ref ref_ring -- ft_suite ring "$ITERS"
ft_ref ref_alltoall -- ft_suite alltoall "$ITERS"
ft_ref ref_jacobi -- ../apps/jacobi

# The plan: --map-by host spreads ranks 0..3 over hosts 1, 2, 3, 1; the CMs on host 0.
name=netns_print_map
if itest_selected $name; then
	itest_run $name "$NP" --cms 2 --hosts "$netns_hosts" --launch netns --map-by host \
		--print-map -- ft_suite ring "$ITERS"
	out=$itest_work/$name.out
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail $name "exit status $itest_rc"
	elif ! grep -q "rank 0 -> $(h 1)" "$out" || ! grep -q "rank 1 -> $(h 2)" "$out" ||
		! grep -q "rank 2 -> $(h 3)" "$out" || ! grep -q "rank 3 -> $(h 1)" "$out"; then
		itest_fail $name "map is not ranks 0..3 -> hosts 1, 2, 3, 1:"
		sed 's/^/    /' "$out"
	elif ! grep -q "^cmserver 0 -> $(h 0) " "$out" || ! grep -q "^cmserver 1 -> $(h 0) " "$out"; then
		itest_fail $name "the map does not put both CMs on host 0 (roles=cm):"
		sed 's/^/    /' "$out"
	else
		itest_pass $name
	fi
fi

# The job, two CMs on host 0, ranks by host. The sampler records which process ran where.
netns_sampler_start
FT_SLEEP_MS=30 ft_same netns_ring ref_ring --cms 2 --hosts "$netns_hosts" --launch netns \
	--map-by host -- ft_suite ring "$ITERS"
netns_sampler_stop
name=netns_placement
if itest_selected netns_ring; then
	itest_elapsed=0
	if ! netns_seen 0 cmrun || ! netns_seen 0 cmserver; then
		itest_fail $name "cmrun and cmserver not both seen on host 0"
	elif ! netns_seen 1 ft_suite 0 || ! netns_seen 2 ft_suite 1 || ! netns_seen 3 ft_suite 2 ||
		! netns_seen 1 ft_suite 3; then
		itest_fail $name "ranks 0..3 not seen on hosts 1, 2, 3, 1"
	elif grep -qE '^0 ft_suite|^[123] cmserver' "$itest_work/placement"; then
		itest_fail $name "a rank on the CM host or a CM on a rank host"
	else
		itest_pass $name
	fi
	[ "$itest_failures" -eq 0 ] || sed 's/^/    seen: /' "$itest_work/placement"
fi
netns_clean netns_ring_clean

# Both CMs killed (--cm-restart): each restarted on host 0 on its address, recovered from
# its journal; the ranks on hosts 1 to 3 reconnect across the links.
FT_VERBOSE=1 FT_SLEEP_MS=30 ft_same netns_ring_cm_death ref_ring --cms 2 --cm-restart \
	--kill-cm-at 0:0.2s --kill-cm-at 1:0.4s --hosts "$netns_hosts" --launch netns \
	--map-by host -- ft_suite ring "$ITERS"
name=netns_ring_cm_death_report
if itest_selected netns_ring_cm_death; then
	if ! grep -q '^cmrun:   channel memories: 2 restarts' \
		"$itest_work/netns_ring_cm_death.report"; then
		itest_fail $name "the fault report does not count 2 CM restarts:"
		sed 's/^/    /' "$itest_work/netns_ring_cm_death.report"
	else
		itest_pass $name
	fi
fi
netns_clean netns_cm_death_clean

# By slot (hosts 1 and 2 full, host 3 idle), one CM, another pattern and an application.
ft_same netns_alltoall_slot ref_alltoall --hosts "$netns_hosts" --launch netns --map-by slot -- \
	ft_suite alltoall "$ITERS"
ft_same netns_jacobi ref_jacobi --cms 2 --hosts "$netns_hosts" --launch netns -- ../apps/jacobi
netns_clean netns_jobs_clean

# The direct transport across hosts: the ranks listen on their host's address.
ft_ref ref_ring_direct --transport direct -- ft_suite ring "$ITERS"
ft_same netns_ring_direct ref_ring_direct --transport direct --hosts "$netns_hosts" \
	--launch netns --map-by host -- ft_suite ring "$ITERS"
netns_clean netns_direct_clean

itest_finish
