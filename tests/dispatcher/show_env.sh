#!/bin/sh
# Run as a rank: prints what cmrun handed it, one "key=value" per line.
env | grep '^CHANMEM_' | grep -v '^CHANMEM_CMSERVER=' | sort
echo "FOO_USER=${FOO_USER-unset}"

# The inherited listening socket (direct transport): state and port.
if [ -n "$CHANMEM_LISTEN_FD" ]; then
	link=$(readlink "/proc/$$/fd/$CHANMEM_LISTEN_FD")
	inode=${link#socket:[}
	inode=${inode%]}
	awk -v ino="$inode" '$10 == ino { split($2, a, ":"); print "listen_state=" $4; print "listen_port_hex=" a[2] }' /proc/net/tcp
fi
sockets=0
for fd in /proc/$$/fd/*; do
	case $(readlink "$fd") in socket:*) sockets=$((sockets + 1)) ;; esac
done
echo "sockets=$sockets"

# cmrun's other children: the secret may be in a cmserver's environment,
# never on anyone's command line.
for pid in $(cat "/proc/$PPID/task/$PPID/children" 2>/dev/null); do
	args=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")
	case $args in
	*"$CHANMEM_SECRET"*) echo "secret_on_command_line=$pid" ;;
	esac
	case $args in
	*--ready-fd*)
		echo "cmserver_args=$args"
		if tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "CHANMEM_SECRET=$CHANMEM_SECRET"; then
			echo "cmserver_has_secret=yes"
		else
			echo "cmserver_has_secret=no"
		fi
		;;
	esac
done
