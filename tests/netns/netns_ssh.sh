#!/bin/bash
# cmrun's built-in ssh launcher (--launch ssh) against a real OpenSSH server: every host of an
# emulated cluster runs its own sshd (listening on that host's address only), and cmrun
# starts the CMs and the ranks through `ssh -o BatchMode=yes -o
# StrictHostKeyChecking=accept-new ADDR CMD`, exactly the argv it builds for a cluster.
# What a user checks: exit 0, the output of the failure-free single-machine run, the
# processes really ran under sshd on the hosts of the map, a rank killed mid-run restarts
# (through ssh again) with the same output, the direct transport works across hosts, a
# checkpointing job resumes a killed rank from its image with the checkpoint server behind
# ssh, and nothing is left on any host afterwards.
#
# Everything ssh lives in the test's work dir: a throwaway host key, client key, authorized
# keys, known hosts, sshd and ssh configs; /root/.ssh, /etc/ssh and any system sshd are
# never read or touched. ssh reads its user config from the passwd entry's home (not $HOME),
# so the only way to hand it ours is -F: an `ssh` first in cmrun's PATH does
# `exec /usr/bin/ssh -F CONFIG "$@"` (same pid, cmrun's argv untouched, logged to check it).
# sshd insists on its privilege separation directory /run/sshd; rather than creating it on
# the machine, each sshd runs in a private mount namespace with a small tmpfs on /run
# (the remote sessions inherit it: nothing of chanmem's uses /run). In that namespace the
# login user's ~/.bashrc, which bash reads for every ssh command, is covered by /dev/null:
# an emulated host starts sessions with a clean shell (seen: a pyenv init in it racing with
# itself across parallel sessions and printing errors into the ranks' stderr). The file
# itself is not touched.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_lib.sh"

SSHD=/usr/sbin/sshd
for tool in ssh ssh-keygen unshare mount; do
	command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: no '$tool' command"; exit 77; }
done
[ -x "$SSHD" ] || { echo "SKIP: no $SSHD (Debian package openssh-server)"; exit 77; }
SSH_CLIENT=$(command -v ssh)

netns_setup 3 1gbit

NP=4
ITERS=30
# Host 0: the head (cmrun), the CMs and the checkpoint server (reached through its own sshd
# like any other host); hosts 1 and 2: two ranks each.
cluster_hostsfile "$netns_hosts" "roles=cm,ckpt" "slots=2 roles=rank" "slots=2 roles=rank"
HB=(--heartbeat-timeout 2s)

ssh_dir=$itest_work/ssh
sshd_pids=()

# --- the throwaway ssh setup -------------------------------------------------------------
mkdir -m 700 "$ssh_dir" "$ssh_dir/bin" || itest_hard_error "mkdir $ssh_dir"
if ! ssh-keygen -q -t ed25519 -N '' -C chanmem-test-host -f "$ssh_dir/host_key" ||
	! ssh-keygen -q -t ed25519 -N '' -C chanmem-test-client -f "$ssh_dir/client_key" ||
	! cp "$ssh_dir/client_key.pub" "$ssh_dir/authorized_keys"; then
	itest_hard_error "ssh-keygen failed"
fi
: >"$ssh_dir/known_hosts"

# StrictModes no: the work dir under /tmp is not a home directory sshd would accept.
# MaxStartups is left at its default, as on a real host.
cat >"$ssh_dir/sshd_config" <<EOF
Port 22
HostKey $ssh_dir/host_key
AuthorizedKeysFile $ssh_dir/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowAgentForwarding no
AllowTcpForwarding no
PermitTunnel no
LogLevel VERBOSE
EOF

# The client side: only our key, only our known hosts (empty: the first job meets every
# host for the first time, as accept-new expects), no connection sharing.
cat >"$ssh_dir/ssh_config" <<EOF
Host *
	User root
	Port 22
	IdentityFile $ssh_dir/client_key
	IdentitiesOnly yes
	UserKnownHostsFile $ssh_dir/known_hosts
	GlobalKnownHostsFile /dev/null
	HashKnownHosts no
	ControlMaster no
	ControlPath none
	ConnectTimeout 10
EOF

cat >"$ssh_dir/bin/ssh" <<EOF
#!/bin/sh
# cmrun's ssh, with this test's client config; cmrun's argv is logged and passed on as is.
echo "\$*" >>"$ssh_dir/argv.log"
exec $SSH_CLIENT -F "$ssh_dir/ssh_config" "\$@"
EOF
chmod +x "$ssh_dir/bin/ssh"
export PATH="$ssh_dir/bin:$PATH"

# sshd_start K: a real sshd in host K, on its address only, in the background by pid.
sshd_start() {
	local k=$1 addr i
	addr=$(cluster_addr "$k")
	: >"$ssh_dir/sshd-$k.log"
	# shellcheck disable=SC2016
	ip netns exec "$(cluster_host "$k")" unshare --mount --propagation private /bin/sh -c \
		'mount -t tmpfs -o mode=0755,size=64k chanmem-sshd /run && mkdir -m 0755 /run/sshd &&
		rc=$(getent passwd "$(id -u)" | cut -d: -f6)/.bashrc &&
		{ [ ! -f "$rc" ] || mount --bind /dev/null "$rc"; } &&
		exec "$@"' sh "$SSHD" -f "$ssh_dir/sshd_config" -D -e -o "ListenAddress=$addr" \
		-o "PidFile=$ssh_dir/sshd-$k.pid" </dev/null >/dev/null 2>>"$ssh_dir/sshd-$k.log" &
	sshd_pids[k]=$!
	for i in $(seq 1 50); do
		grep -q "Server listening on $addr port 22" "$ssh_dir/sshd-$k.log" && return 0
		kill -0 "${sshd_pids[k]}" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}

# sshd_stop_all: SIGTERM each sshd we started, by pid, and reap it (bounded).
sshd_stop_all() {
	local k pid i
	for k in "${!sshd_pids[@]}"; do
		pid=${sshd_pids[k]}
		kill "$pid" 2>/dev/null
		for i in $(seq 1 30); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		unset "sshd_pids[$k]"
	done
}

# Stop the sshds (and our sampler) before netns_lib's and the cluster's cleanup.
previous=$(trap -p EXIT)
eval "set -- $previous"
# shellcheck disable=SC2064
trap "netns_sampler_stop; sshd_stop_all; $3" EXIT

for k in 0 1 2; do
	if ! sshd_start "$k"; then
		why=$(grep -v '^$' "$ssh_dir/sshd-$k.log" | tail -n 3 | tr '\n' ' ')
		echo "SKIP: sshd does not start in an emulated host: ${why:-no message}"
		exit 77
	fi
done

# --- helpers -----------------------------------------------------------------------------
# The ranks and CMs of every host: "HOST COMM RANK INCARNATION PARENT GRANDPARENT" (comms
# of the process, its parent and grandparent). Builtins where it can: it runs every 0.1 s.
ssh_sample_once() {
	local k pid comm env rank inc ppid gpid pcomm gcomm
	for k in 0 1 2; do
		for pid in $(cluster_pids "$k"); do
			read -r comm 2>/dev/null <"/proc/$pid/comm" || continue
			case $comm in ft_suite | cmserver | ckpt_ring | ckptserver) ;; *) continue ;; esac
			read -r _ _ _ ppid _ 2>/dev/null <"/proc/$pid/stat" || continue
			read -r pcomm 2>/dev/null <"/proc/$ppid/comm" || pcomm=-
			read -r _ _ _ gpid _ 2>/dev/null <"/proc/$ppid/stat" || gpid=0
			read -r gcomm 2>/dev/null <"/proc/$gpid/comm" || gcomm=-
			env=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ")
			[[ $env =~ (^|$'\n')CHANMEM_RANK=([0-9]+) ]] && rank=${BASH_REMATCH[2]} || rank=-
			[[ $env =~ (^|$'\n')CHANMEM_INCARNATION=([0-9]+) ]] && inc=${BASH_REMATCH[2]} || inc=0
			echo "$k $comm $rank $inc $pcomm $gcomm"
		done
	done
}

ssh_sampler_start() {
	: >"$itest_work/placement.raw"
	(
		for i in $(seq 1 600); do # at most ~60 s
			ssh_sample_once
			sleep 0.1
		done
	) >>"$itest_work/placement.raw" &
	netns_sampler_pid=$! # netns_sampler_stop stops it and writes $itest_work/placement
}

# ssh_kill_rank HOST RANK: SIGKILL rank RANK's process on HOST (the job's, found by its
# CHANMEM_RANK), as a rank dying under its sshd session.
ssh_kill_rank() {
	local pid
	for pid in $(cluster_pids "$1"); do
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = ft_suite ] || continue
		tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "CHANMEM_RANK=$2" &&
			kill -KILL "$pid"
	done
}

# ssh_clean NAME: nothing left in any host but the sshd listeners (no session, no rank).
# A process that has exited and waits to be reaped (state Z) is not left running: one
# whose session ended is re-parented to the machine's init, which reaps in its own time.
# Sessions that are closing get up to 3 s.
ssh_clean() {
	local name=$1 k pid left= tries
	itest_selected "$name" || return 0
	itest_elapsed=0
	echo "ip netns pids (every host), but the sshd listeners and exited ones" \
		>"$itest_work/$name.cmd"
	for tries in $(seq 30); do
		left=
		for k in 0 1 2; do
			for pid in $(cluster_pids "$k"); do
				[ "$pid" = "${sshd_pids[k]}" ] && continue
				[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && continue
				[ -e "/proc/$pid" ] && left="$left $pid"
			done
		done
		[ -z "$left" ] && break
		sleep 0.1
	done
	if [ -z "$left" ]; then
		itest_pass "$name"
	else
		# shellcheck disable=SC2086
		ps -o pid=,ppid=,stat=,args= -p "$(echo $left | tr ' ' ',')" >"$itest_work/$name.err"
		itest_fail "$name" "processes left in the cluster's hosts"
		# shellcheck disable=SC2086
		kill -KILL $left 2>/dev/null
	fi
}

accepted() { # HOST: sessions sshd on HOST accepted so far
	grep -c "Accepted publickey for root from " "$ssh_dir/sshd-$1.log"
}

# At the end of a job cmrun stops a remote CM by SIGTERM to its launcher; the ssh client then
# exits 255, which cmrun must take as the stop it asked for (no "exited with status 255 when
# asked to stop" warning): stderr is checked strictly below.
# ssh's note on a first contact under accept-new (tagged with the rank for a rank's ssh; ssh
# ends its messages with \r\n).
ACCEPT_NEW_WARNING="^(\\[[0-9]+\\] )?Warning: Permanently added '10\\.200\\.0\\.[123]' "
ACCEPT_NEW_WARNING+="\\(ED25519\\) to the list of known hosts\\.[[:cntrl:]]?$"

# ssh_same NAME REF ALLOWED_ERE [cmrun options] -- PROGRAM ARGS: as ft_same (exit 0, REF's
# output, no leftovers of the job's session), stderr empty but for lines matching
# ALLOWED_ERE ('^$': none).
ssh_same() {
	local name=$1 ref=$2 allowed=$3 clean=0 other
	shift 3
	itest_selected "$name" || return 0
	itest_run "$name" "$NP" --tag-output "$@" || clean=1
	other=$(grep -vE "$allowed" "$itest_work/$name.err")
	if [ "$itest_rc" -ne 0 ]; then
		itest_fail "$name" "exit status $itest_rc, expected 0"
	elif ! diff -u "$itest_work/$ref.sorted" <(ft_sorted "$name") >"$itest_work/$name.diff"; then
		itest_fail "$name" "output differs from the failure-free run:"
		head -n 20 "$itest_work/$name.diff" | sed 's/^/    /'
	elif [ -n "$other" ]; then
		itest_fail "$name" "unexpected output on stderr:"
		head -n 5 <<<"$other" | sed -n 's/^/    /;l'
	elif [ "$clean" -ne 0 ]; then
		itest_fail "$name" "processes left behind"
	else
		itest_pass "$name"
	fi
}

# --- the jobs ----------------------------------------------------------------------------
# The failure-free references, on one machine (cmrun on host 0, no --hosts).
ft_ref ref_ring -- ft_suite ring "$ITERS"
ft_ref ref_ring_direct --transport direct -- ft_suite ring "$ITERS"
ft_ref ref_ckpt -- ckpt_ring "$ITERS"

SSH_JOB=(--hosts "$netns_hosts" --launch ssh --map-by host --export FT_SLEEP_MS=30)

# (a) Two CMs on host 0, ranks 0..3 on hosts 1, 2, 1, 2, every process through ssh. The
# first contact with each host: accept-new records its key, ssh says so on stderr (the only
# thing allowed there), and nothing else.
name=ssh_ring
if itest_selected $name; then
	ssh_sampler_start
	ssh_same $name ref_ring "$ACCEPT_NEW_WARNING" --cms 2 "${SSH_JOB[@]}" -- \
		ft_suite ring "$ITERS"
	netns_sampler_stop
	name=ssh_ring_known_hosts
	itest_elapsed=0
	echo "cat $ssh_dir/known_hosts" >"$itest_work/$name.cmd"
	# Two processes of one host making first contact at the same moment both add its
	# key (ssh's own race, harmless): every line must be one of the 3 hosts with the
	# one host key, and ssh must have said so for each line it added.
	n_lines=$(wc -l <"$ssh_dir/known_hosts")
	n_hosts=$(cut -d' ' -f1 "$ssh_dir/known_hosts" | sort -u | grep -cE '^10\.200\.0\.[123]$')
	n_keys=$(cut -d' ' -f2- "$ssh_dir/known_hosts" | sort -u | wc -l)
	n_other=$(grep -cvE '^10\.200\.0\.[123] ' "$ssh_dir/known_hosts")
	if [ "$n_hosts" -ne 3 ] || [ "$n_keys" -ne 1 ] || [ "$n_other" -ne 0 ] ||
		[ "$n_lines" -gt 6 ] ||
		[ "$(grep -cE "$ACCEPT_NEW_WARNING" "$itest_work/ssh_ring.err")" -ne "$n_lines" ]; then
		itest_fail $name "accept-new did not record the 3 hosts' keys:"
		sed 's/^/    /' "$ssh_dir/known_hosts"
	else
		itest_pass $name
	fi

	name=ssh_ring_argv
	itest_elapsed=0
	echo "cat $ssh_dir/argv.log" >"$itest_work/$name.cmd"
	# The argv cmrun gave ssh: exactly the built-in one, 6 processes (2 CMs, 4 ranks).
	argv_re="^-o BatchMode=yes -o StrictHostKeyChecking=accept-new 10\.200\.0\.[123] "
	argv_re+="[^ ]*cmrun --remote-exec "
	n_ssh=$(grep -cE "$argv_re" "$ssh_dir/argv.log")
	if [ "$n_ssh" -ne 6 ] || [ "$(wc -l <"$ssh_dir/argv.log")" -ne 6 ]; then
		itest_fail $name "ssh was not run 6 times with the built-in argv:"
		sed 's/^/    /' "$ssh_dir/argv.log"
	elif [ "$(grep -c ' 10\.200\.0\.1 .* --watch ' "$ssh_dir/argv.log")" -ne 2 ]; then
		itest_fail $name "the two CMs did not go to host 0 under --remote-exec --watch"
	else
		itest_pass $name
	fi

	# Really through sshd: each host accepted our key, the ranks' parent is an sshd session
	# on their host, the CMs' (under cmrun --remote-exec --watch) one on host 0.
	name=ssh_ring_under_sshd
	itest_elapsed=0
	echo "placement + sshd logs" >"$itest_work/$name.cmd"
	p=$itest_work/placement
	if [ "$(accepted 0)" -ne 2 ] || [ "$(accepted 1)" -ne 2 ] || [ "$(accepted 2)" -ne 2 ]; then
		itest_fail $name "sshd sessions accepted on hosts 0, 1, 2:" \
			"$(accepted 0), $(accepted 1), $(accepted 2), expected 2 each"
	elif ! grep -qE '^1 ft_suite 0 0 sshd ' "$p" || ! grep -qE '^2 ft_suite 1 0 sshd ' "$p" ||
		! grep -qE '^1 ft_suite 2 0 sshd ' "$p" || ! grep -qE '^2 ft_suite 3 0 sshd ' "$p"; then
		itest_fail $name "ranks 0..3 not seen under sshd on hosts 1, 2, 1, 2"
		sed 's/^/    seen: /' "$p"
	elif ! grep -qE '^0 cmserver - 0 cmrun sshd$' "$p"; then
		itest_fail $name "no cmserver seen on host 0 under cmrun --remote-exec under sshd"
		sed 's/^/    seen: /' "$p"
	elif grep -qE '^0 ft_suite|^[12] cmserver' "$p"; then
		itest_fail $name "a rank on the CM host or a CM on a rank host"
	else
		itest_pass $name
	fi
fi
ssh_clean ssh_ring_clean

# (b) Rank 1 (host 2) killed mid-run under its sshd session: ssh reports the lost process,
# cmrun starts rank 1 again through ssh and the CMs replay; the same output as ever.
name=ssh_kill
if itest_selected $name; then
	before=$(($(accepted 1) + $(accepted 2)))
	ssh_sampler_start
	netns_when_running $name 1 5 ssh_kill_rank 2 1
	ssh_same $name ref_ring '^$' "${SSH_JOB[@]}" "${HB[@]}" -- ft_suite ring "$ITERS"
	netns_trigger_wait
	netns_sampler_stop
	name=ssh_kill_restarted
	itest_elapsed=0
	echo "placement + sshd logs" >"$itest_work/$name.cmd"
	if [ ! -e "$itest_work/trigger.done" ]; then
		itest_fail $name "the kill never happened (rank 1 printed < 5 lines)"
	elif ! grep -qE '^[12] ft_suite 1 1 sshd ' "$itest_work/placement"; then
		itest_fail $name "rank 1's second incarnation was never seen under sshd"
		sed 's/^/    seen: /' "$itest_work/placement"
	elif [ "$(($(accepted 1) + $(accepted 2) - before))" -lt 5 ]; then
		itest_fail $name "fewer than 5 new sshd sessions on hosts 1 and 2 (4 ranks, 1 restart)"
	else
		itest_pass $name
	fi
fi
ssh_clean ssh_kill_clean

# (c) The direct transport through ssh: the ranks listen on their hosts' addresses.
ssh_same ssh_ring_direct ref_ring_direct '^$' --transport direct "${SSH_JOB[@]}" -- \
	ft_suite ring "$ITERS"
ssh_clean ssh_direct_clean

# (d) Application checkpoints through ssh: the checkpoint server on host 0 (roles=ckpt)
# under cmrun --remote-exec --watch, rank 1 kills itself in step 15 and must resume from
# its latest image, restarted through ssh; the same output as ever; the job succeeded, so
# its images are gone from the remote server's directory.
name=ssh_ckpt
if itest_selected $name; then
	ssh_sampler_start
	mkdir -p "$itest_work/ckpt_report"
	ssh_same $name ref_ckpt '^$' "${SSH_JOB[@]}" --ckpt-dir "$itest_work/ckpt_images" \
		--export FT_KILL_RANK=1 --export FT_KILL_AT=15 \
		--export "CKPT_REPORT_DIR=$itest_work/ckpt_report" -- ckpt_ring "$ITERS"
	netns_sampler_stop
	name=ssh_ckpt_resumed
	itest_elapsed=0
	echo "cat $itest_work/ckpt_report/rank.1; placement" >"$itest_work/$name.cmd"
	step=$(sed -n 's/^resumed at step \([0-9]*\) incarnation [0-9]*$/\1/p' \
		"$itest_work/ckpt_report/rank.1" 2>/dev/null | tail -n 1)
	if [ -z "$step" ] || [ "$step" -lt 1 ] || [ "$step" -gt 15 ]; then
		itest_fail $name "rank 1 did not resume from an image in steps 1..15 (${step:-none})"
	elif ! grep -qE '^0 ckptserver - 0 cmrun sshd$' "$itest_work/placement"; then
		itest_fail $name "no ckptserver seen on host 0 under cmrun --remote-exec under sshd"
		sed 's/^/    seen: /' "$itest_work/placement"
	elif ! grep -qE '^2 ckpt_ring 1 1 sshd ' "$itest_work/placement"; then
		itest_fail $name "rank 1's second incarnation not seen under sshd on host 2"
		sed 's/^/    seen: /' "$itest_work/placement"
	else
		itest_pass "$name: resumed at step $step"
	fi
	# The job succeeded: cmrun removed its images through the remote server.
	name=ssh_ckpt_removed
	echo "ls $itest_work/ckpt_images" >"$itest_work/$name.cmd"
	left=$(ls "$itest_work/ckpt_images" 2>/dev/null | grep -c '^img-')
	if [ ! -f "$itest_work/ckpt_images/data.mdb" ]; then
		itest_fail $name "no checkpoint store in $itest_work/ckpt_images"
	elif [ "$left" -ne 0 ]; then
		itest_fail $name "$left image file(s) left after the job succeeded"
	else
		itest_pass $name
	fi
fi
ssh_clean ssh_ckpt_clean

# The sshds go (by pid); then nothing at all may be left in any host.
sshd_stop_all
netns_clean ssh_all_clean

itest_finish
