#!/bin/bash
# Partition on the emulated cluster: mid-run, a rank host's link is cut
# (its switch port down: no FIN, no RST, its connections just hang). With
# --heartbeat-timeout 2s cmrun must declare the rank lost, restart it on a surviving host
# with replay, and the job must end as the failure-free run. Then the link comes back while
# the job still runs: the stale incarnation, still alive on the partitioned host, must not
# corrupt the run (its frames refused, its output not mixed in), and must not outlive it.
#
# Two launchers: --launch netns (the rank is cmrun's own child, which cmrun kills by pid:
# no stale process survives) and a template whose local child is only a wrapper on the
# head host (like ssh): killing the wrapper leaves the rank running on its host, in its own
# session, exactly what a remote process behind a partition does.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lib.sh"
netns_setup 4 1gbit

NP=4
ITERS=120
cluster_hostsfile "$netns_hosts" "roles=cm" "slots=2 roles=rank" "slots=2 roles=rank" \
	"slots=2 roles=rank"
HB=(--heartbeat-timeout 2s)
CUT_HOST=2 # --map-by host: ranks 0..3 on hosts 1, 2, 3, 1; host 2 carries rank 1
CUT_RANK=1

netns_remote_wrapper "$itest_work/remote"

ft_ref ref_ring -- ft_suite ring "$ITERS"

# In the background: once rank CUT_RANK printed 10 lines, cut its host; once its second
# incarnation runs on another host, restore the link and note whether the job still ran.
partition_driver() {
	local name=$1 i
	for i in $(seq 1 250); do
		[ "$(grep -c "^\[$CUT_RANK\] " "$itest_work/$name.out" 2>/dev/null)" -ge 10 ] && break
		sleep 0.1
	done
	[ "$i" -lt 250 ] || { touch "$itest_work/trigger.missed"; return; }
	cluster_cut "$CUT_HOST"
	touch "$itest_work/cut.done"
	for i in $(seq 1 300); do
		grep -qE "^[013] ft_suite $CUT_RANK 1\$" "$itest_work/placement.raw" && break
		sleep 0.1
	done
	# Still running: some rank has not printed its last iteration yet.
	[ "$(grep -c " ring it $((ITERS - 1)) " "$itest_work/$name.out")" -lt "$NP" ] &&
		touch "$itest_work/restored.while_running"
	# Is the first incarnation still alive behind the partition?
	netns_sample_once | grep -qE "^$CUT_HOST ft_suite $CUT_RANK 0\$" &&
		touch "$itest_work/stale.at_restore"
	cluster_restore "$CUT_HOST"
	touch "$itest_work/trigger.done"
}

# Bounded wait (15 s) for every host to be empty: a stale incarnation must end by itself
# once its connections are refused.
wait_cluster_empty() {
	local i k busy
	for i in $(seq 1 150); do
		busy=0
		for ((k = 0; k < CLUSTER_SIZE; k++)); do
			[ -n "$(cluster_pids "$k")" ] && busy=1
		done
		[ "$busy" = 0 ] && return 0
		sleep 0.1
	done
}

# partition_case NAME STALE [cmrun options]: STALE yes: the first incarnation must still be
# alive behind the partition when the link comes back; no: cmrun killed it by pid.
partition_case() {
	local name=$1 stale=$2
	shift 2
	itest_selected "$name" || return 0
	rm -f "$itest_work"/{cut.done,trigger.done,trigger.missed,restored.while_running,stale.at_restore}
	netns_sampler_start
	partition_driver "$name" &
	netns_trigger_pid=$!
	FT_SLEEP_MS=30 ft_same "$name" ref_ring --hosts "$netns_hosts" --map-by host "${HB[@]}" \
		"$@" -- ft_suite ring "$ITERS"
	netns_trigger_wait
	wait_cluster_empty
	netns_sampler_stop
	local check=${name}_restarted_elsewhere
	itest_elapsed=0
	if [ ! -e "$itest_work/cut.done" ]; then
		itest_fail "$check" "the link was never cut (rank $CUT_RANK printed < 10 lines)"
	elif ! grep -qE "^[013] ft_suite $CUT_RANK 1\$" "$itest_work/placement"; then
		itest_fail "$check" "rank $CUT_RANK's second incarnation never ran on another host"
		sed 's/^/    seen: /' "$itest_work/placement"
	elif [ ! -e "$itest_work/restored.while_running" ]; then
		itest_fail "$check" "the job ended before the link was restored (stale case not exercised)"
	elif [ "$stale" = yes ] && [ ! -e "$itest_work/stale.at_restore" ]; then
		itest_fail "$check" "the first incarnation was gone before the link came back"
	elif [ "$stale" = no ] && [ -e "$itest_work/stale.at_restore" ]; then
		itest_fail "$check" "the first incarnation (cmrun's own child) was still alive"
	else
		itest_pass "$check"
	fi
	netns_clean "${name}_clean"
	# The link is up again for the next case, whatever happened.
	cluster_restore "$CUT_HOST" 2>/dev/null
}

partition_case netns_partition no --launch netns
partition_case netns_partition_stale yes --launch "exec $itest_work/remote {host} {cmd}"

itest_finish
