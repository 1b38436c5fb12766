#!/bin/bash
# A channel memory's journal on a host that does not share cmrun's files
# (cmserver --journal-scratch, which cmrun passes to the CMs and standbys
# it starts through a launcher): the CM makes the journal's directory when
# it is missing and removes the journal, and the directory once empty, at
# its clean end; files it keeps otherwise. Then cmrun jobs whose CMs run
# through a launch template that gives them an empty /tmp of their own (a
# private mount namespace: cmrun's journal directory does not exist
# there), with a CM killed and restarted on its journal (--cm-restart) and
# a CM taken over by its standby (--cm-standby): output equal to the
# failure-free run, exit 0, nothing left of the journals in cmrun's /tmp.
here=$(dirname "$0")
. "$here/lib.sh"
. "$here/ft_lib.sh"
itest_setup

CMSERVER_BIN=${CMSERVER:?CMSERVER not set (run through make check)}
export CHANMEM_SECRET=0123456789abcdef0123456789abcdef
W=$itest_work
itest_elapsed=0 # what itest_pass prints: the cmserver checks are not timed
NP=2
ITERS=60

# scratch_run NAME [options]: a cmserver in the background with a journal
# in $W/NAME/sub (missing), stopped with SIGTERM once it listens; its exit
# status in $status.
scratch_run() {
	local name=$1 i
	shift
	mkdir -p "$W/$name"
	"$CMSERVER_BIN" --listen 127.0.0.1:0 --no-unix --journal "$W/$name/sub/cm0" "$@" \
		>"$W/$name.out" 2>"$W/$name.err" &
	local pid=$!
	for i in $(seq 1 100); do
		grep -q '^cmserver: listening on' "$W/$name.out" && break
		sleep 0.1
	done
	listed=$(ls "$W/$name/sub" 2>/dev/null | tr '\n' ' ')
	kill -TERM "$pid"
	wait "$pid"
	status=$?
}

name=scratch_needs_journal
if itest_selected $name; then
	echo "cmserver --journal-scratch" >"$W/$name.cmd"
	"$CMSERVER_BIN" --listen 127.0.0.1:0 --journal-scratch >/dev/null 2>"$W/$name.err"
	rc=$?
	if [ "$rc" -ne 2 ] || ! grep -q -- '--journal-scratch needs --journal FILE' "$W/$name.err"; then
		itest_fail $name "exit status $rc, expected 2 and the reason"
	else
		itest_pass $name
	fi
fi

name=scratch_made_and_removed
if itest_selected $name; then
	echo "cmserver --journal $W/$name/sub/cm0 --journal-scratch; SIGTERM" >"$W/$name.cmd"
	scratch_run $name --journal-scratch
	if [ "$listed" != "cm0 cm0.data " ]; then
		itest_fail $name "the journal's directory holds '$listed', expected 'cm0 cm0.data '"
	elif [ "$status" -ne 0 ]; then
		itest_fail $name "exit status $status after SIGTERM, expected 0"
	elif [ -e "$W/$name/sub" ]; then
		itest_fail $name "$W/$name/sub still there after the clean end"
	else
		itest_pass $name
	fi
fi

name=journal_kept_without_scratch
if itest_selected $name; then
	mkdir -p "$W/$name/sub"
	echo "cmserver --journal $W/$name/sub/cm0; SIGTERM" >"$W/$name.cmd"
	scratch_run $name
	if [ "$status" -ne 0 ] || [ ! -f "$W/$name/sub/cm0" ] || [ ! -f "$W/$name/sub/cm0.data" ]; then
		itest_fail $name "exit status $status; the journal must stay without --journal-scratch"
	else
		itest_pass $name
	fi
fi

# A "host" of its own /tmp: the launched command runs in a mount namespace
# with an empty tmpfs there, and without cmrun's TMPDIR (ssh would not pass
# it either).
cat >"$W/own_tmp" <<'EOF'
#!/bin/sh
exec env -u TMPDIR unshare -m sh -c 'mount -t tmpfs tmpfs /tmp && exec "$@"' sh "$@"
EOF
chmod +x "$W/own_tmp"
if [[ $(realpath "$CMRUN") == /tmp/* ]]; then
	itest_log "SKIP: the cmrun jobs: the build is under /tmp, which their own /tmp hides"
	itest_finish
	exit
fi
if ! "$W/own_tmp" true 2>/dev/null; then
	itest_log "SKIP: the cmrun jobs: no private mount namespace here (unshare -m, mount)"
	itest_finish
	exit
fi
printf 'h0 addr=127.0.0.1 slots=2 roles=rank,cm\nh1 addr=127.0.0.1 slots=2 roles=rank,cm\n' \
	>"$W/hosts"
# cmrun makes its journal directory under $TMPDIR: a private one in the work
# directory (under /tmp, which the CMs' mount namespace hides: the CMs make
# the whole path), empty again after each job.
JT=$W/cmrun-tmp
mkdir -p "$JT"

ft_ref scratch_ref -- ft_suite ring "$ITERS"
OWN_TMP=(--hosts "$W/hosts" --launch "exec $W/own_tmp {cmd}" --export FT_SLEEP_MS=10)
TMPDIR=$JT ft_same scratch_cm_restart scratch_ref --cms 2 --cm-restart --kill-cm-at 0:0.3s \
	--kill-cm-at 1:0.5s "${OWN_TMP[@]}" -- ft_suite ring "$ITERS"
# The standby says it takes over (cmserver's own line, let through).
TMPDIR=$JT FT_VERBOSE=1 ft_same scratch_cm_standby scratch_ref --cms 2 --cm-standby \
	--kill-cm-at 0:0.3s "${OWN_TMP[@]}" -- ft_suite ring "$ITERS"
name=scratch_restarts_counted
if itest_selected scratch_cm_restart && itest_selected scratch_cm_standby; then
	echo "the fault reports; ls $JT" >"$W/$name.cmd"
	if ! grep -q '^cmrun:   channel memories: 2 restarts' "$W/scratch_cm_restart.report" ||
		! grep -q '^cmrun:   channel memories: 1 restart' "$W/scratch_cm_standby.report"; then
		itest_fail $name "the CM deaths were not all survived:"
		cat "$W/scratch_cm_restart.report" "$W/scratch_cm_standby.report" | sed 's/^/    /'
	elif [ -n "$(ls -A "$JT")" ]; then
		itest_fail $name "left in cmrun's TMPDIR: $(ls -A "$JT" | tr '\n' ' ')"
	else
		itest_pass $name
	fi
fi
itest_finish
