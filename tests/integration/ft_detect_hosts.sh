#!/bin/bash
# Placement (cmrun --hosts FILE, --host LIST, --print-map) and the detection
# options: what cmrun accepts, the map it prints, and the clear errors
# (exit 2, naming FILE:LINE) for what it refuses. Nothing here starts a rank.
here=$(dirname "$0")
. "$here/lib.sh"
itest_setup

# hosts_map NAME EXPECTED_FILE cmrun-options...: --print-map prints exactly that.
hosts_map() { itest_print_map "$1" "$2" "$PROGDIR/ft_detect" "${@:3}"; }

# hosts_bad NAME PATTERN cmrun-options...: exit 2, PATTERN (ERE) on stderr,
# nothing on stdout.
hosts_bad() { itest_refused "$1" "$2" "$PROGDIR/ft_detect" "${@:3}"; }

w=$itest_work
cat >"$w/hosts.good" <<'HOSTS'
# two machines, the second twice as large
node-a slots=2   # ranks 0 and 1
	node_b.x   slots=4

node-c
HOSTS
cat >"$w/map.good" <<'MAP'
rank 0 -> node-a (home CM 0)
rank 1 -> node-a (home CM 1)
rank 2 -> node_b.x (home CM 0)
rank 3 -> node_b.x (home CM 1)
rank 4 -> node_b.x (home CM 0)
MAP
hosts_map hosts_file_map "$w/map.good" -n 5 --cms 2 --hosts "$w/hosts.good"

printf 'rank 0 -> a (home CM 0)\nrank 1 -> b (home CM 0)\nrank 2 -> b (home CM 0)\nrank 3 -> c (home CM 0)\n' \
	>"$w/map.short"
hosts_map hosts_short_map "$w/map.short" -n 4 --host a,b:2,c:5
printf 'rank 0 -> localhost (home CM 0)\nrank 1 -> localhost (home CM 1)\n' >"$w/map.local"
hosts_map hosts_default_map "$w/map.local" -n 2 --cms 2
printf 'rank 0 -> x\nrank 1 -> x\n' >"$w/map.direct"
hosts_map hosts_direct_map "$w/map.direct" -n 2 --transport direct --host x:2
# Replicas of a rank go to different hosts when there are several.
printf 'rank 0 replica 0 -> a\nrank 0 replica 1 -> b\nrank 1 replica 0 -> b\nrank 1 replica 1 -> a\n' \
	>"$w/map.repl"
hosts_map hosts_repl_map "$w/map.repl" -n 2 --replicate 2 --host a,b

printf 'a slots=2\nb slot=3\n' >"$w/hosts.attr"
hosts_bad hosts_bad_attr "hosts.attr:2: unknown attribute 'slot' \(known: slots, addr, roles\)" \
	-n 2 --hosts "$w/hosts.attr"
printf '# fine\na\nb slots=0\n' >"$w/hosts.slots"
hosts_bad hosts_bad_slots "hosts.slots:3: slots='0': want a number" -n 1 --hosts "$w/hosts.slots"
printf 'a\nb extra\n' >"$w/hosts.word"
hosts_bad hosts_bad_word "hosts.word:2: 'extra' is not KEY=VALUE" -n 1 --hosts "$w/hosts.word"
printf 'a\nb/c\n' >"$w/hosts.name"
hosts_bad hosts_bad_name "hosts.name:2: 'b/c' is not a host name" -n 1 --hosts "$w/hosts.name"
printf 'a\nb\na slots=3\n' >"$w/hosts.twice"
hosts_bad hosts_twice "hosts.twice:3: host 'a' is listed twice" -n 1 --hosts "$w/hosts.twice"
printf '# nothing\n\n' >"$w/hosts.empty"
hosts_bad hosts_empty "no host in the file" -n 1 --hosts "$w/hosts.empty"
hosts_bad hosts_missing "--hosts $w/nope: No such file" -n 1 --hosts "$w/nope"
hosts_bad hosts_few_slots "-n 4 needs 4 slots, and the hosts of --host have 3" -n 4 --host a,b:2
hosts_bad hosts_both "--hosts and --host both" -n 1 --host a --hosts "$w/hosts.good"
hosts_bad hosts_short_bad "--host: 'b:x': slots must be a number" -n 1 --host a,b:x
hosts_bad hosts_short_empty "'' is not a host name" -n 1 --host a,,b
hosts_bad kill_host_unknown "--kill-host z@1s: no host 'z' in --host" -n 2 --host a,b --kill-host z@1s
hosts_bad kill_host_form "--kill-host takes NAME@DELAY" -n 2 --host a,b --kill-host a
hosts_bad kill_host_alone "--kill-host goes with --hosts or --host" -n 2 --kill-host localhost@1s
hosts_bad kill_host_direct "needs --transport cm" -n 2 --transport direct --host a,b \
	--kill-host a@1s
hosts_bad hb_bad "--heartbeat-timeout takes 0 \(off\) or a duration" -n 1 --heartbeat-timeout 1ms
hosts_bad hb_word "--heartbeat-timeout takes" -n 1 --heartbeat-timeout never

itest_finish
