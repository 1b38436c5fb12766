#!/bin/sh
# Stands in for cmserver (CHANMEM_CMSERVER points here): appends the command
# line cmrun gave it to $CM_ARGS_FILE, one CM per line, then runs the real
# cmserver ($CMSERVER) with it, so the job shows the CM also accepted it.
printf '%s\n' "$*" >>"$CM_ARGS_FILE"
exec "$CMSERVER" "$@"
