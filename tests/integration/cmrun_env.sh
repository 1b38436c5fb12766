#!/bin/bash
# Every rank gets CHANMEM_RANK/SIZE/INCARNATION/SECRET/TRANSPORT and CMS
# (cm) or PEERS + its own listening socket (direct); the rest of the user's
# environment is unchanged; the secret never appears on a command line.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"

# Values from an enclosing job must not leak in; the user's own do.
CHANMEM_RANK=77 CHANMEM_SIZE=99 CHANMEM_HOME=5 CHANMEM_LISTEN_FD=3 FOO_USER=bar
export CHANMEM_RANK CHANMEM_SIZE CHANMEM_HOME CHANMEM_LISTEN_FD FOO_USER

value() { # RANK KEY: the value rank RANK printed for KEY
	grep "^\[$1\] $2=" "$T/out" | head -1 | sed "s/^\[$1\] $2=//"
}

check_common() { # NRANKS TRANSPORT
	secret0=$(value 0 CHANMEM_SECRET)
	echo "$secret0" | grep -qx '[0-9a-f]\{32\}' || fail "secret '$secret0' is not 32 hex chars"
	r=0
	while [ "$r" -lt "$1" ]; do
		[ "$(value $r CHANMEM_RANK)" = "$r" ] || fail "rank $r: CHANMEM_RANK=$(value $r CHANMEM_RANK)"
		[ "$(value $r CHANMEM_SIZE)" = "$1" ] || fail "rank $r: CHANMEM_SIZE"
		[ "$(value $r CHANMEM_INCARNATION)" = 0 ] || fail "rank $r: CHANMEM_INCARNATION"
		[ "$(value $r CHANMEM_TRANSPORT)" = "$2" ] || fail "rank $r: CHANMEM_TRANSPORT"
		[ "$(value $r CHANMEM_SECRET)" = "$secret0" ] || fail "rank $r: another secret"
		[ "$(value $r FOO_USER)" = bar ] || fail "rank $r: user environment lost"
		[ -z "$(value $r CHANMEM_HOME)" ] || fail "rank $r: inherited CHANMEM_HOME leaked"
		r=$((r + 1))
	done
	! grep -q secret_on_command_line "$T/out" || fail "the secret is on a command line"
}

note "transport direct"
run_cmrun -n 5 --transport direct --tag-output sh "$HELPERS/show_env.sh"
expect_status 0 "direct env"
check_common 5 direct
peers=$(value 0 CHANMEM_PEERS)
[ "$(echo "$peers" | tr ',' '\n' | grep -c '^127\.0\.0\.1:[0-9]\{1,5\}$')" = 5 ] || fail "CHANMEM_PEERS='$peers'"
[ "$(echo "$peers" | tr ',' '\n' | sort -u | wc -l)" = 5 ] || fail "CHANMEM_PEERS has duplicates"
r=0
while [ "$r" -lt 5 ]; do
	[ "$(value $r CHANMEM_PEERS)" = "$peers" ] || fail "rank $r sees other peers"
	[ -z "$(value $r CHANMEM_CMS)" ] || fail "rank $r: CHANMEM_CMS with transport direct"
	[ "$(value $r listen_state)" = 0A ] || fail "rank $r: CHANMEM_LISTEN_FD is not a listening socket"
	port=$(( 0x$(value $r listen_port_hex) ))
	want=$(echo "$peers" | cut -d, -f$((r + 1)))
	[ "127.0.0.1:$port" = "$want" ] || fail "rank $r listens on $port, CHANMEM_PEERS says $want"
	# Its own listener only: the other ranks' are not inherited.
	[ "$(value $r sockets)" = 1 ] || fail "rank $r holds $(value $r sockets) sockets"
	r=$((r + 1))
done
secret_first=$(value 0 CHANMEM_SECRET)

need_cmserver
note "transport cm, 3 CMs"
run_cmrun -n 4 --cms 3 --tag-output sh "$HELPERS/show_env.sh"
expect_status 0 "cm env"
check_common 4 cm
cms=$(value 0 CHANMEM_CMS)
# CMs on the ranks' host: their abstract unix sockets (cm_unix.sh).
[ "$(echo "$cms" | tr ',' '\n' | grep -c '^unix:@[0-9a-f]\{5\}$')" = 3 ] || fail "CHANMEM_CMS='$cms'"
[ "$(echo "$cms" | tr ',' '\n' | sort -u | wc -l)" = 3 ] || fail "CHANMEM_CMS has duplicates"
r=0
while [ "$r" -lt 4 ]; do
	[ "$(value $r CHANMEM_CMS)" = "$cms" ] || fail "rank $r sees other CMs"
	[ -z "$(value $r CHANMEM_PEERS)" ] || fail "rank $r: CHANMEM_PEERS with transport cm"
	[ -z "$(value $r CHANMEM_LISTEN_FD)" ] || fail "rank $r: CHANMEM_LISTEN_FD with transport cm"
	[ "$(value $r sockets)" = 0 ] || fail "rank $r holds $(value $r sockets) sockets"
	r=$((r + 1))
done
[ "$(grep -c '^\[0\] cmserver_has_secret=yes$' "$T/out")" = 3 ] ||
	fail "cmservers lack the secret in their environment: $(grep cmserver "$T/out")"
grep '^\[0\] cmserver_args=' "$T/out" | grep -v -- "--mode mono --listen 127.0.0.1:0 --ready-fd" &&
	fail "unexpected cmserver arguments"
[ "$(value 0 CHANMEM_SECRET)" != "$secret_first" ] || fail "two jobs got the same secret"

note "--mode and --max-message reach cmserver"
run_cmrun -n 1 --max-message 64KiB --tag-output sh "$HELPERS/show_env.sh"
expect_status 0 "max-message"
grep -q -- "--max-message 65536" "$T/out" || fail "--max-message not passed: $(grep cmserver_args "$T/out")"
finish
