#!/bin/bash
# Stands in for a cmserver that misbehaves at start-up (CHANMEM_CMSERVER
# points here). FAKE_CMSERVER says how:
#   exit      exits with status 3 at once
#   garbage   reports something that is not HOST:PORT on the ready pipe
# cmrun passes: --mode M --listen A --ready-fd FD [...]
# (bash, not sh: dash cannot redirect to a descriptor above 9)
fd=""
while [ $# -gt 0 ]; do
	case $1 in
	--ready-fd) fd=$2; shift ;;
	esac
	shift
done
case $FAKE_CMSERVER in
exit)
	echo "fake cmserver: failing on purpose" >&2
	exit 3
	;;
garbage)
	[ -n "$fd" ] || exit 2
	eval "echo 'not-an-address' >&$fd"
	exec sleep 60
	;;
esac
exit 2
