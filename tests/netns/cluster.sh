# Emulated cluster of network-namespace hosts. Source it from bash.
#
#   cluster_create H [RATE]   H hosts (1..60) named "$CLUSTER_PREFIX-hK" (K = 0..H-1), each a
#                             network namespace with loopback up and one veth "eth0" into a
#                             bridge; the bridge lives in a namespace of its own,
#                             "$CLUSTER_PREFIX-sw", so nothing at all is added to the root
#                             namespace and two clusters may reuse the same subnet. Host K has
#                             address 10.200.0.(K+1)/24. RATE (e.g. 1gbit, 100mbit; default:
#                             none) limits every link in both directions with tc tbf.
#   cluster_set_rate RATE|none   change every link's limit afterwards (tc qdisc replace/del)
#   cluster_host K / cluster_addr K    namespace name / IPv4 address of host K
#   cluster_exec K CMD...     run CMD in host K (ip netns exec)
#   cluster_pids K            pids of the processes living in host K
#   cluster_crash K           node crash: SIGKILL every process of host K (bounded wait)
#   cluster_cut K             partition: the switch port of host K goes down. The host keeps
#                             its address and route, its link just loses carrier: packets
#                             vanish, TCP connections hang (no RST, no FIN), connects time out
#   cluster_restore K         the switch port comes back up
#   cluster_hostsfile FILE ROLE...   a cmrun --hosts file, one line per host; ROLE K is the
#                             rest of host K's line (e.g. "slots=2 roles=rank")
#   cluster_destroy           kill every process in the cluster, delete every namespace (and
#                             so every veth and the bridge). Runs by itself on EXIT, and on
#                             INT/TERM through the script's exit; idempotent.
#
# Names are unique per run ("cmnt" + the creating shell's pid + a random suffix), so tests
# may run in parallel under make -j. Clusters of a shell that died without cleaning up (e.g.
# SIGKILL) are reaped by the next cluster_create: only namespaces whose name carries our
# prefix and a pid that no longer exists.
#
# Where namespaces cannot be created (not root, no CAP_NET_ADMIN, no ip or tc), cluster_create
# says so plainly and exits 77, automake's SKIP.
#
# Why the tbf settings: burst 128 KiB is about 1 ms at 1 Gbit/s and holds a whole 64 KiB
# GSO packet from the veth (a smaller burst would make tbf split every GSO packet in
# software, costing CPU on a small machine instead of emulating a link); latency 20 ms sizes
# the queue (2.5 MB at 1 Gbit/s) so TCP's bursts queue rather than drop. A ping-pong has no
# standing queue, so latency is not inflated by it. tbf counts frames without preamble,
# inter-frame gap and FCS, so TCP payload tops out near 1448/1514 of the rate (~956 Mbit/s at
# 1gbit, where real Gigabit Ethernet gives ~941), and the burst lets the first ~1 ms of a
# transfer through at veth speed (visible below ~2 MiB: ~1020 Mbps at 1 MiB; at 8 MiB it adds
# ~1.5 %: NPtcp measures ~958-969 Mbit/s).

CLUSTER_PREFIX=
CLUSTER_SIZE=0
CLUSTER_SUBNET=10.200.0

cluster_log() {
	printf 'cluster: %s\n' "$*" >&2
}

cluster_skip() {
	printf 'SKIP: emulated cluster unavailable: %s\n' "$*"
	exit 77
}

cluster_host() { printf '%s-h%s\n' "$CLUSTER_PREFIX" "$1"; }
cluster_addr() { printf '%s.%s\n' "$CLUSTER_SUBNET" $(($1 + 1)); }
cluster_switch() { printf '%s-sw\n' "$CLUSTER_PREFIX"; }

cluster_exec() {
	local k=$1
	shift
	ip netns exec "$(cluster_host "$k")" "$@"
}

# Pids in namespace NS (ip netns pids), without the error when it is already gone.
cluster_ns_pids() {
	ip netns pids "$1" 2>/dev/null
}

cluster_pids() {
	cluster_ns_pids "$(cluster_host "$1")"
}

# cluster_kill_ns NS: SIGKILL every process in NS until none is left (at most ~5 s).
cluster_kill_ns() {
	local ns=$1 i pids
	for i in $(seq 1 50); do
		pids=$(cluster_ns_pids "$ns")
		[ -z "$pids" ] && return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null
		sleep 0.1
	done
	cluster_log "processes still in $ns after 5 s: $(cluster_ns_pids "$ns" | tr '\n' ' ')"
	return 1
}

cluster_crash() {
	cluster_kill_ns "$(cluster_host "$1")"
}

cluster_cut() {
	ip -n "$(cluster_switch)" link set "p$1" down
}

cluster_restore() {
	ip -n "$(cluster_switch)" link set "p$1" up
}

# The namespaces of one cluster, hosts first, the switch last.
cluster_namespaces() { # PREFIX
	local all
	all=$(ip netns list 2>/dev/null | awk '{print $1}')
	grep -E "^$1-h[0-9]+\$" <<<"$all"
	grep -xF "$1-sw" <<<"$all"
}

cluster_destroy_prefix() { # PREFIX
	local ns
	for ns in $(cluster_namespaces "$1"); do
		cluster_kill_ns "$ns"
	done
	for ns in $(cluster_namespaces "$1"); do
		ip netns del "$ns" 2>/dev/null || cluster_log "could not delete namespace $ns"
	done
}

cluster_destroy() {
	[ -n "$CLUSTER_PREFIX" ] || return 0
	cluster_destroy_prefix "$CLUSTER_PREFIX"
	CLUSTER_PREFIX=
	CLUSTER_SIZE=0
}

# Clusters left by shells that no longer exist (killed before their trap could run).
cluster_reap_stale() {
	local prefix pid
	for prefix in $(ip netns list 2>/dev/null | awk '{print $1}' |
		sed -n 's/^\(cmnt[0-9][0-9]*x[0-9][0-9]*\)-\(h[0-9][0-9]*\|sw\)$/\1/p' | sort -u); do
		pid=${prefix#cmnt}
		pid=${pid%%x*}
		[ -d "/proc/$pid" ] && continue
		cluster_log "removing stale cluster $prefix (its shell $pid is gone)"
		cluster_destroy_prefix "$prefix"
	done
}

# Run cluster_destroy before whatever EXIT trap the script already has (itest_cleanup).
cluster_install_trap() {
	local previous
	previous=$(trap -p EXIT)
	if [ -n "$previous" ]; then
		eval "set -- $previous"
		previous=$3
	fi
	# shellcheck disable=SC2064
	trap "cluster_destroy; $previous" EXIT
	# A signal ends the script through its EXIT trap (lib.sh installs the same).
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

# cluster_tbf NS DEV RATE: the rate limit on DEV's egress (set or changed).
cluster_tbf() {
	tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst 128kb latency 20ms
}

cluster_set_rate() {
	local rate=$1 k ns
	for ((k = 0; k < CLUSTER_SIZE; k++)); do
		ns=$(cluster_host "$k")
		if [ "$rate" = none ]; then
			tc -n "$ns" qdisc del dev eth0 root 2>/dev/null
			tc -n "$(cluster_switch)" qdisc del dev "p$k" root 2>/dev/null
		else
			cluster_tbf "$ns" eth0 "$rate" && cluster_tbf "$(cluster_switch)" "p$k" "$rate" || return 1
		fi
	done
}

cluster_create() {
	local hosts=$1 rate=${2:-} k sw ns
	[[ $hosts =~ ^[0-9]+$ && $hosts -ge 1 && $hosts -le 60 ]] ||
		{ cluster_log "cluster_create: want 1..60 hosts, not '$hosts'"; return 2; }
	[ -z "$CLUSTER_PREFIX" ] || { cluster_log "cluster_create: a cluster exists already"; return 2; }
	command -v ip >/dev/null 2>&1 || cluster_skip "no 'ip' command (Debian package iproute2)"
	[ -z "$rate" ] || command -v tc >/dev/null 2>&1 ||
		cluster_skip "no 'tc' command (Debian package iproute2)"
	[ "$(id -u)" = 0 ] || cluster_skip "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to create network namespaces)"
	cluster_reap_stale
	CLUSTER_PREFIX=cmnt$$x$RANDOM$RANDOM
	CLUSTER_SIZE=$hosts
	cluster_install_trap
	sw=$(cluster_switch)
	if ! ip netns add "$sw" 2>/dev/null; then
		CLUSTER_PREFIX=
		cluster_skip "'ip netns add' failed (no CAP_NET_ADMIN, or no network namespaces in this kernel or container)"
	fi
	if ! ip -n "$sw" link add br0 type bridge 2>/dev/null; then
		cluster_destroy
		cluster_skip "cannot create a bridge in a namespace (kernel without bridge support?)"
	fi
	ip -n "$sw" link set br0 up || { cluster_destroy; return 1; }
	for ((k = 0; k < hosts; k++)); do
		ns=$(cluster_host "$k")
		ip netns add "$ns" &&
			ip -n "$ns" link set lo up &&
			ip -n "$sw" link add "p$k" type veth peer name eth0 netns "$ns" &&
			ip -n "$sw" link set "p$k" master br0 &&
			ip -n "$ns" addr add "$(cluster_addr "$k")/24" dev eth0 &&
			ip -n "$ns" link set eth0 up &&
			ip -n "$sw" link set "p$k" up ||
			{ cluster_log "cannot create host $k"; cluster_destroy; return 1; }
		if [ -n "$rate" ]; then
			# Both directions: host -> switch on eth0, switch -> host on the port.
			if ! cluster_tbf "$ns" eth0 "$rate" || ! cluster_tbf "$sw" "p$k" "$rate"; then
				cluster_destroy
				[ "$k" = 0 ] && cluster_skip "tc tbf refused (kernel without sch_tbf?)"
				cluster_log "cannot limit host $k's link to $rate"
				return 1
			fi
		fi
	done
	cluster_wait_reachable
}

# Every switch port forwards and every host's link has carrier (bounded: with STP off the
# bridge forwards at once; this only guards against a slow link-up).
cluster_wait_reachable() {
	local k i
	for ((k = 0; k < CLUSTER_SIZE; k++)); do
		for i in $(seq 1 50); do
			ip -n "$(cluster_host "$k")" link show eth0 | grep -q LOWER_UP &&
				bridge -n "$(cluster_switch)" link show dev "p$k" | grep -q 'state forwarding' &&
				break
			sleep 0.1
		done
		[ "$i" -lt 50 ] || { cluster_log "host $k's link does not come up"; return 1; }
	done
}

cluster_hostsfile() {
	local file=$1 k=0 role
	shift
	: >"$file"
	for role in "$@"; do
		printf '%s addr=%s %s\n' "$(cluster_host "$k")" "$(cluster_addr "$k")" "$role" >>"$file"
		k=$((k + 1))
	done
}

# cluster_leftovers: report the pids still living in any host (nothing should be there
# once a job ended); returns 1 if there are any.
cluster_leftovers() {
	local k pids found=0
	for ((k = 0; k < CLUSTER_SIZE; k++)); do
		pids=$(cluster_pids "$k")
		[ -z "$pids" ] && continue
		found=1
		cluster_log "processes left in host $k:"
		# shellcheck disable=SC2086
		ps -o pid=,ppid=,stat=,args= -p $(echo $pids | tr ' ' ',') >&2
	done
	[ "$found" = 0 ]
}
