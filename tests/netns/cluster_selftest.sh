#!/bin/bash
# The emulated cluster itself (tests/netns/cluster.sh), no chanmem involved: hosts reach each
# other through the switch and nothing is added to the root namespace; the links are rate
# limited both ways; a cut link makes a connection hang (no reset) and a restored one
# delivers what was queued; a crash kills every process of a host, including one in a
# session of its own; and the cluster disappears, processes included, when its script ends
# normally, on SIGTERM, or (reaped by the next cluster_create) after SIGKILL. Where
# namespaces cannot be created the library says so and the test SKIPs (exit 77); that path
# is checked too, with 'ip' off PATH and as an unprivileged user.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/lib.sh"
. "$here/cluster.sh"
# Only the library is tested: no cmrun needed, but lib.sh wants these set.
PROGDIR=${PROGDIR:-/nonexistent} TESTSRC=${TESTSRC:-$here/..} CMRUN=${CMRUN:-/bin/true}
itest_setup
w=$itest_work
itest_elapsed=0

check() { # NAME MESSAGE COMMAND...: pass if COMMAND succeeds
	local name=$1 msg=$2
	shift 2
	echo "$name: $*" >"$w/$name.cmd"
	if "$@" >"$w/$name.out" 2>"$w/$name.err"; then
		itest_pass "$name"
	else
		itest_fail "$name" "$msg"
		sed 's/^/    /' "$w/$name.out" | head -n 10
	fi
}

cluster_create 3 1gbit || itest_hard_error "cluster_create failed"
prefix=$CLUSTER_PREFIX

check netns_created "not 4 namespaces (3 hosts and the switch)" \
	test "$(ip netns list | grep -c "^$prefix-")" = 4
# (Not a before/after diff of the root namespace: other jobs on the machine may add links.)
check netns_root_untouched "the root namespace has a link into the cluster" \
	sh -c "! ip -o link show | grep -e 'link-netns $prefix-' -e '$prefix'"
check netns_addresses "host 2 lacks its address" \
	sh -c "ip -n $(cluster_host 2) -4 -o addr show dev eth0 | grep -q ' $(cluster_addr 2)/24 '"
check netns_tbf_both_ways "links not rate limited in both directions" \
	sh -c "tc -n $(cluster_host 1) qdisc show dev eth0 | grep -q 'tbf.*rate 1Gbit' &&
		tc -n $(cluster_switch) qdisc show dev p1 | grep -q 'tbf.*rate 1Gbit'"

# A line echo server on host 0 (perl is in every Debian's perl-base), in the background;
# cluster_destroy ends it with the rest.
port=7777
cat >"$w/echo.pl" <<'PERL'
use IO::Socket::INET;
my $s = IO::Socket::INET->new(LocalAddr => $ARGV[0], LocalPort => $ARGV[1], Listen => 5,
	ReuseAddr => 1) or die "listen: $!";
open(my $ready, '>', $ARGV[2]) or die; close($ready);
while (my $c = $s->accept()) { while (my $l = <$c>) { print $c $l; $c->flush(); } }
PERL
cluster_exec 0 perl "$w/echo.pl" "$(cluster_addr 0)" "$port" "$w/echo.ready" &
for i in $(seq 1 50); do [ -e "$w/echo.ready" ] && break; sleep 0.1; done

# The client on host 1: a connection over the switch, a line echoed, then the cut: the next
# line gets no answer within 2 s and the connection is not reset; after the restore the
# answer arrives (TCP retransmits; bounded at 15 s).
cat >"$w/client.sh" <<'CLIENT'
addr=$1 port=$2 dir=$3
exec 3<>"/dev/tcp/$addr/$port" || exit 1
echo first >&3
read -r -t 5 line <&3 && [ "$line" = first ] || { echo "no echo before the cut"; exit 1; }
touch "$dir/cut.now"
for i in $(seq 1 50); do [ -e "$dir/cut.done" ] && break; sleep 0.1; done
echo second >&3
read -r -t 2 line <&3
rc=$?
[ "$rc" -gt 128 ] || { echo "read during the cut returned $rc ('$line'), expected a timeout"; exit 1; }
touch "$dir/restore.now"
read -r -t 15 line <&3 && [ "$line" = second ] || { echo "no echo after the restore"; exit 1; }
echo "hung during the cut, delivered after the restore"
CLIENT
cluster_exec 1 bash "$w/client.sh" "$(cluster_addr 0)" "$port" "$w" >"$w/client.out" 2>&1 &
client=$!
for i in $(seq 1 100); do [ -e "$w/cut.now" ] && break; sleep 0.1; done
cluster_cut 1
touch "$w/cut.done"
for i in $(seq 1 100); do [ -e "$w/restore.now" ] && break; sleep 0.1; done
cluster_restore 1
wait "$client"
client_rc=$?
check netns_cut_hangs_restore_delivers "$(cat "$w/client.out")" test "$client_rc" = 0

# A crash: every process of host 2 dies, the one in a session of its own too.
cluster_exec 2 sleep 300 &
sleeper=$!
cluster_exec 2 setsid -f sleep 300
for i in $(seq 1 50); do [ "$(cluster_pids 2 | wc -l)" -ge 2 ] && break; sleep 0.1; done
cluster_crash 2
wait "$sleeper" 2>/dev/null
sleeper_rc=$?
check netns_crash_kills_all "host 2 still has processes or the sleeper was not killed" \
	sh -c "[ -z \"\$(ip netns pids $(cluster_host 2))\" ] && [ $sleeper_rc = 137 ]"

cluster_destroy
check netns_destroy "namespaces of $prefix left" \
	sh -c "! ip netns list | grep -q '^$prefix-'"

# A script holding a cluster and a process in it, ended by SIGTERM: nothing is left.
child_script='. "$1/cluster.sh"; cluster_create 2 || exit 1; echo "$CLUSTER_PREFIX" >"$2.tmp";
cluster_exec 1 sleep 300 & mv "$2.tmp" "$2"; wait'
bash -c "$child_script" child "$here" "$w/term.prefix" &
child=$!
for i in $(seq 1 100); do [ -e "$w/term.prefix" ] && break; sleep 0.1; done
kill -TERM "$child"
wait "$child"
term_rc=$?
term_prefix=$(cat "$w/term.prefix" 2>/dev/null)
check netns_destroy_on_term "exit status $term_rc or namespaces of '$term_prefix' left" \
	sh -c "[ -n '$term_prefix' ] && [ $term_rc = 143 ] && ! ip netns list | grep -q '^$term_prefix-'"

# The same killed with SIGKILL (no trap runs): the next cluster_create reaps it.
bash -c "$child_script" child "$here" "$w/kill.prefix" &
child=$!
for i in $(seq 1 100); do [ -e "$w/kill.prefix" ] && break; sleep 0.1; done
kill -KILL "$child"
wait "$child" 2>/dev/null
kill_prefix=$(cat "$w/kill.prefix" 2>/dev/null)
# (A new bash, not a subshell: a subshell would inherit this script's EXIT trap.)
bash -c '. "$1/cluster.sh"; cluster_create 1' x "$here" 2>"$w/reap.err"
check netns_reap_stale "namespaces of '$kill_prefix' left after SIGKILL and a new cluster" \
	sh -c "[ -n '$kill_prefix' ] && ! ip netns list | grep -q '^$kill_prefix-' &&
		grep -q 'removing stale cluster $kill_prefix' '$w/reap.err'"

# No namespaces possible: a plain SKIP (77) with the reason, twice.
bash -c '. "$1/cluster.sh"; PATH=/nonexistent; cluster_create 2' x "$here" >"$w/skip_ip.out" 2>&1
skip_rc=$?
check netns_skip_without_ip "exit $skip_rc, expected 77 and a reason" \
	sh -c "[ $skip_rc = 77 ] && grep -q \"no 'ip' command\" '$w/skip_ip.out'"
setpriv --reuid 65534 --regid 65534 --clear-groups bash -c '. "$1/cluster.sh"; cluster_create 2' \
	x "$here" >"$w/skip_user.out" 2>&1
skip_rc=$?
check netns_skip_unprivileged "exit $skip_rc, expected 77 and a reason" \
	sh -c "[ $skip_rc = 77 ] && grep -q 'SKIP: emulated cluster unavailable' '$w/skip_user.out'"

itest_finish
