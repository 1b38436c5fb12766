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
#
# Then the host of a channel memory (CMs on the rank hosts, --cm-standby): its link cut,
# neither the CM nor its standby can reach the other. The standby takes over once the
# stream has been silent for 5 s, the CM stops on its own (it cannot answer anything the
# standby does not hold, so the two never both serve), the ranks behind the cut restart
# elsewhere, and the ranks outside, whose connections to the CM just hang, give up on them
# and reach the standby.
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
		grep -qE "^[^$CUT_HOST] ft_suite $CUT_RANK 1\$" "$itest_work/placement.raw" && break
		sleep 0.1
	done
	# RESTORE_WHEN: a line cmrun -v must have printed first (up to 30 s).
	for i in $(seq 1 300); do
		[ -z "${RESTORE_WHEN:-}" ] || grep -q "$RESTORE_WHEN" "$itest_work/$name.err" && break
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
	FT_SLEEP_MS=30 ft_same "$name" ref_ring --hosts "${HOSTS_FILE:-$netns_hosts}" --map-by host \
		"${HB[@]}" "$@" -- ft_suite ring "$ITERS"
	netns_trigger_wait
	wait_cluster_empty
	netns_sampler_stop
	local check=${name}_restarted_elsewhere
	itest_elapsed=0
	if [ ! -e "$itest_work/cut.done" ]; then
		itest_fail "$check" "the link was never cut (rank $CUT_RANK printed < 10 lines)"
	elif ! grep -qE "^[^$CUT_HOST] ft_suite $CUT_RANK 1\$" "$itest_work/placement"; then
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

# CM 0 and ranks 0 and 3 on host 1, CM 1 and rank 1 on host 2, rank 2 on host 3; each CM's
# standby on the next CM host (CM 0's on host 2). Host 1 cut.
cluster_hostsfile "$itest_work/hosts_cm" "roles=ckpt" "slots=2 roles=rank,cm" \
	"slots=2 roles=rank,cm" "slots=2 roles=rank,cm"
name=netns_partition_cm_host
CUT_HOST=1 CUT_RANK=0 HOSTS_FILE=$itest_work/hosts_cm FT_VERBOSE=1 RESTORE_WHEN="took over" \
	partition_case $name no --launch netns --cms 2 --cm-standby -v
if itest_selected $name; then
	itest_elapsed=0
	if grep -q "^cmrun: cmserver 0: its standby (pid [0-9]*, host $(cluster_host 2)) took over" \
		"$itest_work/$name.err"; then
		itest_pass ${name}_standby
	else
		itest_fail ${name}_standby "CM 0's standby on host 2 did not take over:"
		grep -E '^cmrun: .*(cmserver|standby)' "$itest_work/$name.err" | head -n 10 |
			sed 's/^/    /'
	fi
fi

itest_finish
