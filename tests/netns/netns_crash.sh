#!/bin/bash
# Node crash on the emulated cluster: mid-run, every process of one rank
# host is killed at once (its namespace emptied, as a machine that loses power). cmrun must
# notice, restart the lost ranks on a surviving host with replay, and the run must end as
# the failure-free run: same output, exit 0, nothing on stderr, nothing left anywhere.
# Also a host carrying two ranks, a crash whose ranks run under a launch template (the
# local child a wrapper, as ssh or srun would be), and a host carrying a channel memory
# and two of its ranks, survived through the CM's standby on another host (--cm-standby).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lib.sh"
netns_setup 4 1gbit

NP=4
ITERS=60
cluster_hostsfile "$netns_hosts" "roles=cm" "slots=2 roles=rank" "slots=2 roles=rank" \
	"slots=2 roles=rank"
HB=(--heartbeat-timeout 2s)

ft_ref ref_ring -- ft_suite ring "$ITERS"
ft_ref ref_alltoall -- ft_suite alltoall "$ITERS"

# crash_case NAME REF HOST RANKS [cmrun options] -- PROGRAM ARGS: crash HOST once rank
# RANKS[0] printed 5 lines; every rank of RANKS must then run again (incarnation 1) on
# another host, and the output must be the reference's.
crash_case() {
	local name=$1 ref=$2 host=$3 ranks=$4 r
	shift 4
	itest_selected "$name" || return 0
	netns_sampler_start
	netns_when_running "$name" "${ranks%%,*}" 5 cluster_crash "$host"
	FT_SLEEP_MS=30 ft_same "$name" "$ref" "$@"
	netns_trigger_wait
	netns_sampler_stop
	crash_check "${name}_restarted_elsewhere" "$host" "$ranks"
	netns_clean "${name}_clean"
}

crash_check() { # CHECK HOST RANKS
	local check=$1 host=$2 ranks=$3 r
	itest_elapsed=0
	if [ ! -e "$itest_work/trigger.done" ]; then
		itest_fail "$check" "the crash never happened (rank ${ranks%%,*} printed < 5 lines)"
		return
	fi
	for r in ${ranks//,/ }; do
		if ! grep -qE "^[0-9]+ ft_suite $r 1\$" "$itest_work/placement"; then
			itest_fail "$check" "rank $r's second incarnation was never seen"
			sed 's/^/    seen: /' "$itest_work/placement"
			return
		elif grep -qE "^$host ft_suite $r 1\$" "$itest_work/placement"; then
			itest_fail "$check" "rank $r restarted on the crashed host $host"
			return
		fi
	done
	itest_pass "$check"
}

# Ranks 0..3 on hosts 1, 2, 3, 1 (--map-by host): host 2 carries rank 1, host 1 ranks 0, 3.
crash_case netns_crash_one ref_ring 2 1 --hosts "$netns_hosts" --launch netns --map-by host \
	"${HB[@]}" -- ft_suite ring "$ITERS"
crash_case netns_crash_two ref_alltoall 1 0,3 --cms 2 --hosts "$netns_hosts" --launch netns \
	--map-by host "${HB[@]}" -- ft_suite alltoall "$ITERS"

# Under a template whose local child stays on the head host (host 0) while the rank runs on
# its host in a session of its own: the crash kills the rank, not cmrun's child. cmrun learns
# it from the wrapper's exit (as from ssh's) or from the lost control connection.
netns_remote_wrapper "$itest_work/remote"
crash_case netns_crash_template ref_ring 3 2 --hosts "$netns_hosts" \
	--launch "exec $itest_work/remote {host} {cmd}" --map-by host "${HB[@]}" -- \
	ft_suite ring "$ITERS"

# CMs on the rank hosts (CM 0 on host 1, CM 1 on host 2; each one's standby on the next
# CM host: 2 and 3), host 1 crashed with CM 0 and ranks 0 and 3: CM 0's standby on host 2
# takes over from the journal CM 0 mirrored to it, ranks 0 and 3 restart elsewhere and are
# replayed from it. Its journal on host 1 is not read again: the standby's copy is enough.
cluster_hostsfile "$itest_work/hosts_cm" "roles=ckpt" "slots=2 roles=rank,cm" \
	"slots=2 roles=rank,cm" "slots=2 roles=rank,cm"
FT_VERBOSE=1 crash_case netns_crash_cm_host ref_alltoall 1 0,3 --cms 2 --cm-standby -v \
	--hosts "$itest_work/hosts_cm" --launch netns --map-by host "${HB[@]}" -- \
	ft_suite alltoall "$ITERS"
name=netns_crash_cm_host_standby
if itest_selected netns_crash_cm_host; then
	itest_elapsed=0
	if grep -q "^cmrun: cmserver 0: its standby (pid [0-9]*, host $(cluster_host 2)) took over" \
		"$itest_work/netns_crash_cm_host.err"; then
		itest_pass $name
	else
		itest_fail $name "CM 0's standby on host 2 did not take over:"
		grep -E '^cmrun: .*(cmserver|standby)' "$itest_work/netns_crash_cm_host.err" |
			head -n 10 | sed 's/^/    /'
	fi
fi

# The direct transport cannot restart: a crashed host stops the job, with a message and a
# failure status, and cmrun tears down what runs on the other hosts (nothing left anywhere).
name=netns_crash_direct
if itest_selected $name; then
	clean=0
	netns_when_running $name 0 5 cluster_crash 2
	FT_SLEEP_MS=30 itest_run $name "$NP" --tag-output --transport direct --hosts "$netns_hosts" \
		--launch netns --map-by host -- ft_suite ring "$ITERS" || clean=1
	netns_trigger_wait
	if [ ! -e "$itest_work/trigger.done" ]; then
		itest_fail $name "the crash never happened (rank 0 printed < 5 lines)"
	elif [ "$itest_rc" -eq 0 ] || ! grep -q "^cmrun: rank [0-9]* " "$itest_work/$name.err"; then
		itest_fail $name "exit status $itest_rc, expected a failure and a message"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
	netns_clean ${name}_clean
fi

itest_finish
