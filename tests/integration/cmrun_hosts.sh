#!/bin/bash
# Multi-host cmrun (docs/deployment.md) on one machine: hosts files with
# addresses and roles (what cmrun refuses, with FILE:LINE), --map-by and
# --print-map, and jobs started through a --launch template. A template
# always counts as remote, so these jobs take the remote path end to end
# with 127.0.0.1 hosts: CMs listen on their host's address and report on
# their stdout, ranks get their environment in the command and the secret
# on stdin, report over a TCP control connection, and direct ranks listen
# on --port-base ports. The template logs every launch, which shows where
# the processes went (a killed host's ranks move to the other host). Each
# job's output must be the failure-free run's, with nothing left behind.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

NP=4
w=$itest_work

# hosts_plan NAME EXPECTED cmrun-options...: --print-map prints exactly that.
hosts_plan() { itest_print_map "$1" "$2" prog "${@:3}"; }

# hosts_refused NAME PATTERN cmrun-options...: exit 2, PATTERN (ERE) on
# stderr, nothing on stdout.
hosts_refused() { itest_refused "$1" "$2" prog "${@:3}"; }

# ---- hosts files: what is refused ----
printf 'a addr=10.0.0.1\nb addr=10.0.0.300\n' >"$w/bad_addr"
hosts_refused bad_addr "bad_addr:2: addr='10.0.0.300': want an IPv4 address" -n 1 \
	--hosts "$w/bad_addr"
printf 'a addr=node7\n' >"$w/name_addr"
hosts_refused name_addr "name_addr:1: addr='node7': want an IPv4 address .*no names" -n 1 \
	--hosts "$w/name_addr"
printf 'a addr=224.0.0.1\n' >"$w/mcast_addr"
hosts_refused mcast_addr "mcast_addr:1: addr='224.0.0.1'" -n 1 --hosts "$w/mcast_addr"
printf 'a\n# x\nb roles=rank,gpu\n' >"$w/bad_role"
hosts_refused bad_role "bad_role:3: roles='rank,gpu': want a comma list of rank, cm and ckpt" \
	-n 1 --hosts "$w/bad_role"
printf 'a roles=cm,cm\n' >"$w/twice_role"
hosts_refused twice_role "twice_role:1: roles='cm,cm'" -n 1 --hosts "$w/twice_role"
printf 'a roles=\n' >"$w/empty_role"
hosts_refused empty_role "empty_role:1: roles=''" -n 1 --hosts "$w/empty_role"
printf 'a roles=cm\nb roles=ckpt\n' >"$w/no_rank"
hosts_refused no_rank "no host with role rank" -n 1 --hosts "$w/no_rank"
printf 'a slots=2 roles=rank\nb slots=8 roles=cm\n' >"$w/cm_slots"
hosts_refused cm_slots "-n 3 needs 3 slots, and the hosts of .*cm_slots have 2" -n 3 \
	--hosts "$w/cm_slots"
printf 'a addr=10.0.0.1 port=5\n' >"$w/bad_key"
hosts_refused bad_key "bad_key:1: unknown attribute 'port' \(known: slots, addr, roles\)" -n 1 \
	--hosts "$w/bad_key"

printf 'a slots=2 addr=10.0.0.1 slots=3\n' >"$w/twice_attr"
hosts_refused twice_attr "twice_attr:1: slots= given twice" -n 1 --hosts "$w/twice_attr"
hosts_refused endless "/dev/zero:1: a line longer than 1024 bytes" -n 1 --hosts /dev/zero
printf 'a slots= 2\n' >"$w/blank_slots"
hosts_refused blank_slots "blank_slots:1: unknown attribute '2'|slots=''" -n 1 \
	--hosts "$w/blank_slots"

# ---- options ----
hosts_refused map_by_bad "--map-by takes slot or host, not 'node'" -n 1 --map-by node
hosts_refused launch_no_cmd "--launch 'ssh -x \{host\}': .*lacks \{cmd\}" -n 1 --host a \
	--launch 'ssh -x {host}'
hosts_refused launch_bad_placeholder "unknown placeholder at '\{hots\}" -n 1 --host a \
	--launch 'ssh {hots} {cmd}'
hosts_refused netns_no_addr "--launch netns: host 'no-such-host.invalid' has no addr=" -n 1 \
	--host no-such-host.invalid --launch netns
hosts_refused control_addr_bad "--control-addr takes an IPv4 address" -n 1 --control-addr x
hosts_refused port_base_bad "--port-base takes a port from 1024 to 65535" -n 1 --port-base 80
hosts_refused port_base_high "--port-base 65534: 4 processes would need ports past 65535" -n 4 \
	--port-base 65534

# ---- placement and the plan ----
cat >"$w/cluster" <<'HOSTS'
# two compute nodes, a service node for the CMs and the checkpoints
n1 slots=2 addr=10.1.0.11
n2 slots=2 addr=10.1.0.12   roles=rank,cm
svc addr=10.1.0.2 roles=cm,ckpt
HOSTS
cat >"$w/plan.ssh" <<'PLAN'
host n1 addr 10.1.0.11 slots 2 roles rank: ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new 10.1.0.11 {cmd}
host n2 addr 10.1.0.12 slots 2 roles rank,cm: ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new 10.1.0.12 {cmd}
host svc addr 10.1.0.2 slots 1 roles cm,ckpt: ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new 10.1.0.2 {cmd}
cmserver 0 -> n2 (10.1.0.12)
cmserver 1 -> svc (10.1.0.2)
cmserver 2 -> n2 (10.1.0.12)
ckptserver -> svc (10.1.0.2)
rank 0 -> n1 (home CM 0)
rank 1 -> n1 (home CM 1)
rank 2 -> n2 (home CM 2)
rank 3 -> n2 (home CM 0)
PLAN
# ssh is the default with addresses outside a Slurm job.
SLURM_JOB_ID= hosts_plan plan_ssh "$w/plan.ssh" -n 4 --cms 3 --ckpt-dir "$w/ck" \
	--hosts "$w/cluster"
cat >"$w/plan.srun" <<'PLAN'
host n1 addr 10.1.0.11 slots 2 roles rank: srun --nodelist n1 -N1 -n1 --kill-on-bad-exit=0 {cmd}
host n2 addr 10.1.0.12 slots 2 roles rank,cm: srun --nodelist n2 -N1 -n1 --kill-on-bad-exit=0 {cmd}
host svc addr 10.1.0.2 slots 1 roles cm,ckpt: srun --nodelist svc -N1 -n1 --kill-on-bad-exit=0 {cmd}
cmserver 0 -> n2 (10.1.0.12)
cmserver 1 -> svc (10.1.0.2)
rank 0 -> n1 (home CM 0)
rank 1 -> n2 (home CM 1)
rank 2 -> n1 (home CM 0)
PLAN
# srun is the default inside a Slurm allocation; --map-by host alternates.
SLURM_JOB_ID=42 hosts_plan plan_srun_map_host "$w/plan.srun" -n 3 --cms 2 --map-by host \
	--hosts "$w/cluster"
cat >"$w/plan.netns" <<'PLAN'
host n1 addr 10.1.0.11 slots 2 roles rank: ip netns exec n1 {cmd}
host n2 addr 10.1.0.12 slots 2 roles rank,cm: ip netns exec n2 {cmd}
host svc addr 10.1.0.2 slots 1 roles cm,ckpt: ip netns exec svc {cmd}
rank 0 -> n1
rank 1 -> n2
rank 2 -> n1
rank 3 -> n2
PLAN
hosts_plan plan_netns_direct "$w/plan.netns" -n 4 --transport direct --map-by host \
	--launch netns --hosts "$w/cluster"
printf 'a slots=2 addr=127.0.0.1\nb slots=2 addr=127.0.0.2\n' >"$w/loop"
cat >"$w/plan.tmpl" <<'PLAN'
host a addr 127.0.0.1 slots 2 roles rank: /bin/sh -c echo a 127.0.0.1 >>log; {cmd}
host b addr 127.0.0.2 slots 2 roles rank: /bin/sh -c echo b 127.0.0.2 >>log; {cmd}
rank 0 replica 0 -> a
rank 0 replica 1 -> b
rank 1 replica 0 -> a
rank 1 replica 1 -> b
PLAN
hosts_plan plan_template "$w/plan.tmpl" -n 2 --replicate 2 --launch 'echo {host} {addr} >>log; {cmd}' \
	--hosts "$w/loop"
# Loopback hosts under ssh run locally: the plan is today's.
printf 'rank 0 -> a (home CM 0)\nrank 1 -> a (home CM 0)\nrank 2 -> b (home CM 0)\n' >"$w/plan.lo"
hosts_plan plan_loopback_local "$w/plan.lo" -n 3 --launch ssh --hosts "$w/loop"

# ---- jobs through a template (the remote path on 127.0.0.1) ----
launches="$w/launches"
tmpl="echo {host} >>$launches; exec env CHANMEM_TEST_HOST={host} {cmd}"
printf 'a slots=2 addr=127.0.0.1\nb slots=2 addr=127.0.0.1 roles=rank,cm\n' >"$w/two"

# count_launches NAME EXPECTED: "a N b M" of the launches log, then cleared.
count_launches() {
	local got
	got=$(sort "$launches" 2>/dev/null | uniq -c | awk '{print $2, $1}' | paste -sd ' ')
	rm -f "$launches"
	[ "$got" = "$2" ] && return 0
	itest_fail "$1" "launches per host: '$got', expected '$2'"
	return 1
}

# tmpl_same NAME REF LAUNCHES [cmrun options] -- PROGRAM ARGS: ft_same through
# the template, then the launches per host.
tmpl_same() {
	local name=$1 ref=$2 want=$3
	shift 3
	itest_selected "$name" || return 0
	rm -f "$launches"
	local before=$itest_failures
	ft_same "$name" "$ref" --hosts "$w/two" --launch "$tmpl" "$@"
	if [ "$itest_failures" -eq "$before" ] && ! count_launches "$name" "$want"; then
		itest_passes=$((itest_passes - 1))
	fi
}

ITERS=30
ft_ref ref_ring -- ft_suite ring "$ITERS"
ft_ref ref_alltoall -- ft_suite alltoall "$ITERS"
# CM on b (role cm), ranks 0,1 on a and 2,3 on b.
tmpl_same tmpl_ring ref_ring "a 2 b 3" -- ft_suite ring "$ITERS"
tmpl_same tmpl_two_cms ref_alltoall "a 2 b 4" --cms 2 --map-by host -- ft_suite alltoall \
	"$ITERS"
# A rank killed mid-run restarts on its own host (the other one there is alive).
FT_KILL_RANK=1 FT_KILL_AT=12 tmpl_same tmpl_kill ref_ring "a 3 b 3" -- ft_suite ring "$ITERS"
# A launcher that forwards no environment (like ssh): --export hands the
# kill settings over, and rank 1 kills itself as above.
name=tmpl_export
if itest_selected $name; then
	rm -f "$launches"
	before=$itest_failures
	FT_KILL_AT=12 ft_same $name ref_ring --hosts "$w/two" --export FT_KILL_RANK=1 --export FT_KILL_AT \
		--launch "echo {host} >>$launches; exec env -i PATH=/usr/bin:/bin {cmd}" -- \
		ft_suite ring "$ITERS"
	if [ "$itest_failures" -eq "$before" ] && ! count_launches $name "a 3 b 3"; then
		itest_passes=$((itest_passes - 1))
	fi
fi
hosts_refused export_bad "--export takes NAME or NAME=VALUE" -n 1 --export 1X
hosts_refused export_own "--export CHANMEM_RANK: the CHANMEM_ variables are cmrun's" -n 1 \
	--export CHANMEM_RANK=3
hosts_refused export_unset "--export NO_SUCH_VAR_H2: not set" -n 1 --export NO_SUCH_VAR_H2

# A whole host killed: its ranks restart on the other one.
FT_SLEEP_MS=20 tmpl_same tmpl_kill_host ref_ring "a 2 b 5" --kill-host a@300ms -- \
	ft_suite ring "$ITERS"
# A stopped rank: its heartbeats over the control connection stop.
ft_ref ref_detect -- ft_detect 20
FT_DETECT_HOW=stop FT_DETECT_RANK=2 FT_DETECT_AT=5 tmpl_same tmpl_stopped ref_detect "a 2 b 4" \
	--heartbeat-timeout 500ms -- ft_detect 20
# Cut off from its CM: the CM's report comes on its stdout through the template.
FT_DETECT_HOW=cut FT_DETECT_RANK=0 FT_DETECT_AT=5 tmpl_same tmpl_cut ref_detect "a 3 b 3" \
	-- ft_detect 20
# Direct transport: ranks listen themselves on --port-base ports, below the
# ephemeral range and (checked, bounded) not in use now.
port_base=
for i in $(seq 1 20); do
	port_base=$((10000 + RANDOM % 20000))
	busy=$(ss -Htan 2>/dev/null | awk -v lo=$port_base -v hi=$((port_base + NP)) \
		'{ n = split($4, a, ":"); p = a[n] + 0; if (p >= lo && p < hi) print p }')
	[ -z "$busy" ] && break
done
ft_ref ref_direct --transport direct -- ft_suite alltoall "$ITERS"
tmpl_same tmpl_direct ref_direct "a 2 b 2" --transport direct --port-base "$port_base" -- \
	ft_suite alltoall "$ITERS"

# A template that hands {cmd} to another shell, as ssh does with its
# arguments (joined by spaces, parsed again on the remote host).
name=tmpl_reparse
if itest_selected $name; then
	ft_same $name ref_ring --hosts "$w/two" \
		--launch "echo {host} >>$launches; exec sh -c \"\$(printf '%s ' {cmd})\"" -- \
		ft_suite ring "$ITERS"
	rm -f "$launches"
fi

# MPI_Abort's code through the control connection.
name=tmpl_abort
if itest_selected $name; then
	clean=0
	itest_run $name "$NP" --hosts "$w/two" --launch "$tmpl" -- ft_detect 0 || clean=1
	rm -f "$launches"
	if [ "$itest_rc" -ne 2 ]; then
		itest_fail $name "exit status $itest_rc, expected 2 (MPI_Abort(2))"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

# Somebody else connects to the control port: without the job secret an
# "abort" line is not believed (the job ends normally, with its output).
name=tmpl_intruder
if itest_selected $name; then
	clean=0
	(
		FT_SLEEP_MS=40 itest_run $name "$NP" --tag-output -v --hosts "$w/two" --launch "$tmpl" \
			-- ft_suite ring "$ITERS"
		left=$?
		echo "$itest_rc" >"$w/$name.rc"
		exit $left
	) &
	job=$!
	port=
	for i in $(seq 1 100); do
		port=$(sed -n 's/.*control connections of remote processes: 127.0.0.1:\([0-9]*\)$/\1/p' \
			"$w/$name.err" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.1
	done
	if [ -n "$port" ]; then
		# A wrong secret, then one of the right length but wrong; each says
		# abort. cmrun may close before the whole line is in: no SIGPIPE.
		(
			trap '' PIPE
			printf 'nope\nabort 0 5\n' >/dev/tcp/127.0.0.1/"$port"
			printf '%032d\nhello 0 0 0\nabort 0 6\n' 0 >/dev/tcp/127.0.0.1/"$port"
		) 2>/dev/null
	fi
	wait $job || clean=1
	itest_rc=$(cat "$w/$name.rc" 2>/dev/null || echo none)
	rm -f "$launches"
	if [ -z "$port" ]; then
		itest_fail $name "no control port in cmrun -v's output"
	elif [ "$itest_rc" != 0 ]; then
		itest_fail $name "exit status $itest_rc, expected 0 (the intruder's abort was believed?)"
	elif ! diff -u "$w/ref_ring.sorted" <(ft_sorted $name) >"$w/$name.diff"; then
		itest_fail $name "output differs from the failure-free run"
	elif [ "$(grep -c 'control connection with a wrong secret' "$w/$name.err")" -ne 2 ]; then
		itest_fail $name "cmrun -v does not report both wrong secrets"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

# Idle connections to the control port (a scan, or an attacker without the
# secret) must not lock out a restarted rank: cmrun used to refuse every
# new connection past 64 unidentified ones, forever. 70 of them are opened
# before rank 1 kills itself; its next incarnation must report in and the
# job end as the failure-free one did.
name=tmpl_idle_flood
if itest_selected $name; then
	clean=0
	(
		FT_KILL_RANK=1 FT_KILL_AT=15 FT_SLEEP_MS=100 itest_run $name "$NP" --tag-output -v \
			--hosts "$w/two" --launch "$tmpl" -- ft_suite ring "$ITERS"
		left=$?
		echo "$itest_rc" >"$w/$name.rc"
		exit $left
	) &
	job=$!
	port=
	for i in $(seq 1 100); do
		port=$(sed -n 's/.*control connections of remote processes: 127.0.0.1:\([0-9]*\)$/\1/p' \
			"$w/$name.err" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.1
	done
	idle=()
	if [ -n "$port" ]; then
		for i in $(seq 1 70); do
			exec {fd}<>/dev/tcp/127.0.0.1/"$port" 2>/dev/null && idle+=("$fd")
		done
	fi
	wait $job || clean=1
	for fd in "${idle[@]}"; do
		exec {fd}>&-
	done
	itest_rc=$(cat "$w/$name.rc" 2>/dev/null || echo none)
	rm -f "$launches"
	if [ -z "$port" ]; then
		itest_fail $name "no control port in cmrun -v's output"
	elif [ "${#idle[@]}" -lt 65 ]; then
		itest_fail $name "only ${#idle[@]} idle connections could be opened"
	elif [ "$itest_rc" != 0 ]; then
		itest_fail $name "exit status $itest_rc, expected 0 (the restarted rank was locked out?)"
	elif ! diff -u "$w/ref_ring.sorted" <(ft_sorted $name) >"$w/$name.diff"; then
		itest_fail $name "output differs from the failure-free run"
	elif ! grep -q -e 'no hello within' -e 'not identified yet; dropping the oldest' \
		"$w/$name.err"; then # at the deadline, or to make room (a short job: only this)
		itest_fail $name "cmrun -v does not report dropping the idle connections"
	elif [ "$clean" -ne 0 ]; then
		itest_fail $name "processes left behind"
	else
		itest_pass $name
	fi
fi

# cmrun killed: what it started through a launcher that does not take it
# down (a backgrounded command, as a remote host's would be) exits on its
# own: ranks when their control connection ends, the CM when its stdin does.
name=tmpl_orphans
if itest_selected $name; then
	mark="$name.$$.$RANDOM"
	CHANMEM_ITEST_MARK=$mark FT_SLEEP_MS=100 setsid "$CMRUN" -n "$NP" --hosts "$w/two" \
		--launch 'exec 3<&0; {cmd} <&3 3<&- & wait' --timeout 60s "$PROGDIR/ft_suite" ring 100 \
		</dev/null >"$w/$name.out" 2>"$w/$name.err" &
	sid=$!
	echo "$CMRUN -n $NP --hosts two --launch '... {cmd} & wait' ft_suite ring 100" >"$w/$name.cmd"
	# Until every rank printed (they are connected), bounded.
	for i in $(seq 1 100); do
		[ "$(grep -c 'it 1 ' "$w/$name.out")" -ge "$NP" ] && break
		sleep 0.1
	done
	kill -KILL "$sid"
	wait "$sid" 2>/dev/null
	itest_elapsed=0
	if [ "$(grep -c 'it 1 ' "$w/$name.out")" -lt "$NP" ]; then
		itest_fail $name "the ranks did not get going"
		itest_check_leftovers "$name" "$mark" "$sid"
	elif ! itest_check_leftovers "$name" "$mark" "$sid"; then
		itest_fail $name "processes outlived cmrun"
	else
		itest_pass $name
	fi
fi

itest_finish
