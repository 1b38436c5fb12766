# Helpers for the tests that run cmrun jobs on the emulated cluster (source from bash).
# They build on tests/integration/lib.sh (itest_*), ft_lib.sh (ft_ref/ft_same) and
# cluster.sh: cmrun itself runs inside host 0 (CMRUN becomes a wrapper doing
# `ip netns exec HOST0 cmrun`), so every job of itest_run/ft_same is a multi-host job as
# soon as it is given --hosts "$netns_hosts" --launch netns.
#
#   netns_setup H [RATE]      itest_setup, the cluster, the head wrapper; SKIP (77) when
#                             namespaces are not available or cmrun has no --launch
#   netns_sampler_start / netns_sampler_stop
#                             while a job runs, record "HOST COMM RANK INCARNATION" of
#                             every process seen in every host ($itest_work/placement,
#                             complete once netns_sampler_stop returns)
#   netns_seen HOST COMM [RANK [INCARNATION]]   such a process was seen
#   netns_when_running HOST RANK ITER CMD...    in the background: once rank RANK on HOST
#                             has printed ITER lines (of --tag-output), run CMD; writes
#                             $itest_work/trigger.done (or trigger.missed, bounded 25 s)
#   netns_clean NAME          pass/fail NAME: no process left in any host
here=${here:-$(cd "$(dirname "$0")" && pwd)}
. "$here/../integration/lib.sh"
. "$here/../integration/ft_lib.sh"
. "$here/cluster.sh"

netns_sampler_pid=
netns_trigger_pid=

netns_setup() {
	if [ "$ITEST_LAUNCHER" != cmrun ]; then
		echo "SKIP: the emulated cluster tests run under cmrun only (ITEST_LAUNCHER=$ITEST_LAUNCHER)"
		exit 77
	fi
	itest_setup
	# cmrun before the cluster: a cmrun without multi-host launching is a SKIP, not a
	# namespace created for nothing.
	if ! "$CMRUN" --help 2>&1 | grep -q -- '--launch'; then
		echo "SKIP: this cmrun has no --launch (multi-host launching)"
		exit 77
	fi
	cluster_create "$@" || itest_hard_error "cannot create the emulated cluster"
	netns_real_cmrun=$CMRUN
	CMRUN=$itest_work/cmrun-on-head
	printf '#!/bin/sh\n# cmrun runs inside host 0 of the emulated cluster\nexec ip netns exec %s %s "$@"\n' \
		"$(cluster_host 0)" "$netns_real_cmrun" >"$CMRUN"
	chmod +x "$CMRUN"
	netns_hosts=$itest_work/hosts
	# Stop the helpers before the cluster goes (they poll it).
	local previous
	previous=$(trap -p EXIT)
	eval "set -- $previous"
	# shellcheck disable=SC2064
	trap "netns_sampler_stop; netns_trigger_stop; $3" EXIT
}

# netns_remote_wrapper FILE: writes the launcher the tests use as a stand-in for ssh:
# `--launch "exec FILE {host} {cmd}"`. Its process (cmrun's child) stays on the head host
# while CMD runs on HOST in a session of its own, so killing the wrapper by pid, as cmrun
# does with a launcher, leaves CMD running, as with a remote process behind a partition.
# CMD's output is relayed by two cats that die with the wrapper (setpriv --pdeathsig), so
# once cmrun has killed its launcher nothing the old process writes reaches cmrun, as over
# ssh. The wrapper exits as CMD did, re-raising its signal.
netns_remote_wrapper() {
	cat >"$1" <<'WRAP'
#!/bin/bash
host=$1
shift
setsid ip netns exec "$host" "$@" <&0 > >(exec setpriv --pdeathsig KILL cat) \
	2> >(exec setpriv --pdeathsig KILL cat >&2) &
{ wait $!; } 2>/dev/null # no "Killed" notice from bash on the rank's stderr
rc=$?
if [ "$rc" -gt 128 ]; then
	trap - "$((rc - 128))" 2>/dev/null
	kill -"$((rc - 128))" $$
fi
exit "$rc"
WRAP
	chmod +x "$1"
}

netns_sample_once() {
	local k pid comm rank inc
	for ((k = 0; k < CLUSTER_SIZE; k++)); do
		for pid in $(cluster_pids "$k"); do
			comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
			rank=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | sed -n 's/^CHANMEM_RANK=//p')
			inc=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" |
				sed -n 's/^CHANMEM_INCARNATION=//p')
			echo "$k $comm ${rank:--} ${inc:-0}"
		done
	done
}

netns_sampler_start() {
	: >"$itest_work/placement.raw"
	(
		for i in $(seq 1 600); do # at most ~60 s
			netns_sample_once
			sleep 0.1
		done
	) >>"$itest_work/placement.raw" &
	netns_sampler_pid=$!
}

# Stops the sampler; $itest_work/placement then holds each line seen once.
netns_sampler_stop() {
	[ -n "$netns_sampler_pid" ] || return 0
	netns_kill_job "$netns_sampler_pid"
	netns_sampler_pid=
	sort -u "$itest_work/placement.raw" >"$itest_work/placement"
}

# Kill a background job we started and the processes it forked (by pid, found through
# the parent links in ps), then reap it.
netns_kill_job() {
	local top=$1 pid ppid all
	all=$top
	while read -r pid ppid; do
		[[ " $all " == *" $ppid "* ]] && all="$all $pid"
	done < <(ps -e -o pid=,ppid= | sort -n)
	# shellcheck disable=SC2086
	kill $all 2>/dev/null
	wait "$top" 2>/dev/null
}

netns_seen() { # HOST COMM [RANK [INC]]
	local pattern="^$1 $2"
	[ $# -ge 3 ] && pattern="$pattern $3" || pattern="$pattern "
	[ $# -ge 4 ] && pattern="$pattern $4\$"
	grep -qE "$pattern" "$itest_work/placement"
}

netns_trigger_stop() {
	[ -n "$netns_trigger_pid" ] || return 0
	netns_kill_job "$netns_trigger_pid"
	netns_trigger_pid=
}

# netns_when_running NAME RANK ITER CMD...: in the background, once job NAME's output has
# ITER lines of rank RANK ("[RANK] " tags), run CMD.
netns_when_running() {
	local name=$1 rank=$2 iter=$3
	shift 3
	rm -f "$itest_work/trigger.done" "$itest_work/trigger.missed"
	(
		for i in $(seq 1 250); do
			if [ "$(grep -c "^\[$rank\] " "$itest_work/$name.out" 2>/dev/null)" -ge "$iter" ]; then
				"$@"
				touch "$itest_work/trigger.done"
				exit 0
			fi
			sleep 0.1
		done
		touch "$itest_work/trigger.missed"
	) &
	netns_trigger_pid=$!
}

netns_trigger_wait() {
	[ -n "$netns_trigger_pid" ] || return 0
	wait "$netns_trigger_pid" 2>/dev/null
	netns_trigger_pid=
}

netns_clean() {
	local name=$1
	itest_selected "$name" || return 0
	itest_elapsed=0
	echo "ip netns pids (every host)" >"$itest_work/$name.cmd"
	if cluster_leftovers 2>"$itest_work/$name.err"; then
		itest_pass "$name"
	else
		itest_fail "$name" "processes left in the cluster's hosts"
		for ((k = 0; k < CLUSTER_SIZE; k++)); do cluster_crash "$k"; done
	fi
}
