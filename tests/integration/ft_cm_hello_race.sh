#!/bin/bash
# A channel memory that dies between a rank's connect and its HELLO
# (cmrun --cm-restart, --cm-standby). A rank's MPI_Init connects to each CM
# and writes HELLO at once; a CM process that ends in between leaves the
# rank a reset connection, and the HELLO's write fails (EPIPE,
# ECONNRESET). The rank must take that as any lost CM connection and
# reconnect, not fail MPI_Init.
#
# The window is microseconds wide; strace widens it: the restarted rank 1
# (incarnation 1, started by --kill-at) runs under strace, which holds its
# first sendmsg (the HELLO; its main thread only) for HOLD seconds, while
# its CM dies:
#   restart   --cm-restart: --kill-cm-at kills the CM the rank connected to;
#   reprotect --cm-standby: the CM's death is taken over by its standby;
#             the rank starts and connects to it; cmrun then stops it to
#             restart it with its new standby (whose start a cmserver
#             wrapper, CHANMEM_CMSERVER, holds back 3 s so that the rank
#             is connected by then).
# Each run must print what the failure-free run prints, and cmrun's -v
# lines must show the order the case needs (else the case says it did not
# arrange the race). Skipped without an strace that can delay a syscall.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

if ! command -v strace >/dev/null ||
	! strace -qq -o /dev/null -e trace=sendmsg -e inject=sendmsg:delay_enter=1:when=1 true \
		2>/dev/null; then
	echo "SKIP: needs strace with syscall delay injection (strace 4.22 or later, ptrace allowed)"
	exit 77
fi

NP=2
ITEST_JOB_TIMEOUT=60s
HOLD=4
export FT_SLEEP_MS=50

# The rank program: incarnation 1 of rank 1 under strace, its first
# sendmsg held HOLD seconds; every other one as it is. LeakSanitizer
# cannot run under ptrace: the traced rank does without it.
rank_prog=$itest_work/held_rank.sh
cat >"$rank_prog" <<EOF
#!/bin/sh
if [ "\$CHANMEM_RANK" = 1 ] && [ "\$CHANMEM_INCARNATION" = 1 ]; then
	ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0"
	export ASAN_OPTIONS
	exec strace -qq -s 0 -o "$itest_work/strace.\$CHANMEM_RANK.\$CHANMEM_INCARNATION" \\
		-e trace=connect,sendmsg -e inject=sendmsg:delay_enter=${HOLD}000000:when=1 \\
		"$PROGDIR/ft_suite" "\$@"
fi
exec "$PROGDIR/ft_suite" "\$@"
EOF
chmod +x "$rank_prog"
rank_rel=$(realpath --relative-to="$PROGDIR" "$rank_prog")

# A cmserver that starts CM 0's second standby (after the first took over)
# 3 s late.
slow_standby=$itest_work/slow_standby.sh
cat >"$slow_standby" <<EOF
#!/bin/sh
case " \$* " in *" --standby "*)
	case " \$* " in *"/cm-0.standby-2 "*) sleep 3 ;; esac ;;
esac
exec "$CMSERVER" "\$@"
EOF
chmod +x "$slow_standby"

ft_ref hello_race_ref --cms 1 -- ft_suite ring 60

# in_order NAME ERE...: each pattern matches a line of NAME's stderr after
# the first line the previous one matched.
in_order() {
	local name=$1 from=0 at
	shift
	for pat in "$@"; do
		at=$(awk -v from="$from" -v pat="$pat" 'NR > from && $0 ~ pat {print NR; exit}' \
			"$itest_work/$name.err")
		if [ -z "$at" ]; then
			itest_fail "$name" "the race was not arranged: no /$pat/ after line $from of cmrun's -v output"
			itest_passes=$((itest_passes - 1)) # ft_same counted it as passed
			return 1
		fi
		from=$at
	done
	# The held HELLO went to the dead CM.
	if ! grep -Eq '^sendmsg\(.* = -1 (EPIPE|ECONNRESET) ' "$itest_work/strace.1.1" 2>/dev/null; then
		itest_fail "$name" "the race was not arranged: rank 1's held HELLO did not fail (strace: $(grep -m 1 '^sendmsg' "$itest_work/strace.1.1" 2>/dev/null))"
		itest_passes=$((itest_passes - 1))
		return 1
	fi
}

# hello_race NAME [cmrun options]: the job, then the order of its events.
hello_race() {
	local name=$1
	shift
	itest_selected "$name" || return 0
	rm -f "$itest_work/strace.1.1"
	local before=$itest_failures
	FT_VERBOSE=1 ft_same "$name" hello_race_ref --cms 1 -v "$@" -- "$rank_rel" ring 60
	[ "$itest_failures" -eq "$before" ] || return 0
	case $name in
	*restart)
		in_order "$name" 'rank 1 started \(pid [0-9]+, incarnation 1' \
			'--kill-cm-at: SIGKILL to cmserver 0' \
			'cmserver 0 \(pid [0-9]+\) listening again' \
			'rank 1 incarnation 1 .*: in MPI_Init'
		;;
	*reprotect)
		in_order "$name" 'cmserver 0: its standby \(pid [0-9]+, host [^)]*\) took over' \
			'rank 1 started \(pid [0-9]+, incarnation 1' \
			'cmserver 0 \(pid [0-9]+\): restarting it with its new standby' \
			'rank 1 incarnation 1 .*: in MPI_Init'
		;;
	esac
}

# The rank connects at about 1 s and writes its HELLO at about 5 s; its
# CM dies at 2 s.
hello_race hello_race_restart --cm-restart --kill-at 1:1s --kill-cm-at 0:2s
# The standby takes over at about 0.5 s; the rank connects to it at about
# 1.2 s and writes its HELLO at about 5.2 s; the new standby listens at
# about 3.5 s, and cmrun stops the CM then.
CHANMEM_CMSERVER=$slow_standby hello_race hello_race_reprotect --cm-standby \
	--kill-cm-at 0:0.5s --kill-at 1:1.2s

itest_finish
