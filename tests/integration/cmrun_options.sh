#!/bin/bash
# cmrun rejects every bad option with a clear message and status 2, and a
# program it cannot run with 127/126, before starting anything.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"

usage_error() {
	msg=$1
	shift
	run_cmrun "$@"
	expect_status 2 "cmrun $*"
	expect_err "$msg" "cmrun $*"
}

note "usage errors"
usage_error "missing -n" true
usage_error "no program to run" -n 2
usage_error "-n takes a number of ranks" -n ' 2' true
usage_error "-n takes a number of ranks" -n +2 true
usage_error "-n takes a number of ranks from 1 to 4096, not '0'" -n 0 true
usage_error "not '-3'" -n -3 true
usage_error "not '4097'" -n 4097 true
usage_error "not 'x'" -n x true
usage_error "not '2.5'" -n 2.5 true
usage_error "--cms takes a number" -n 2 --cms 0 true
usage_error "--cms takes a number" -n 2 --cms many true
usage_error "--mode takes mono, thread-per-client, multiplexer or specialized, not 'fast'" -n 2 --mode fast true
usage_error "--transport takes cm or direct, not 'udp'" -n 2 --transport udp true
usage_error "--timeout takes a duration" -n 2 --timeout soon true
usage_error "--timeout takes a duration" -n 2 --timeout -1s true
usage_error "--max-message takes a size" -n 2 --max-message 0 true
usage_error "--max-message takes a size" -n 2 --max-message 5GiB true
usage_error "--max-message takes a size" -n 2 --max-message 12XB true
usage_error "option '--timeout' needs a value" -n 2 --timeout
usage_error "unknown option '--bogus'" -n 2 --bogus true
usage_error "unknown option '-x'" -n 2 -x true
usage_error "apply to --transport cm only" -n 2 --transport direct --cms 2 true
usage_error "apply to --transport cm only" -n 2 --transport direct --mode mono true

note "--help"
run_cmrun --help
expect_status 0 "--help"
grep -q "^Usage: cmrun -n N" "$T/out" || fail "--help prints no usage"

note "program resolution"
run_cmrun -n 2 --transport direct cmrun-no-such-program-here
expect_status 127 "missing program"
expect_err "cannot run 'cmrun-no-such-program-here': no such program in PATH" "missing program"
run_cmrun -n 2 --transport direct ./no/such/file
expect_status 127 "missing path"
expect_err "No such file or directory" "missing path"
printf 'echo hi\n' >"$T/notexec"
chmod 644 "$T/notexec"
run_cmrun -n 2 --transport direct "$T/notexec"
expect_status 126 "not executable"
expect_err "Permission denied" "not executable"
run_cmrun -n 2 --transport direct "$T"
expect_status 126 "directory"
expect_err "Is a directory" "directory"

note "options after PROGRAM belong to PROGRAM"
run_cmrun -n 1 --transport direct -- sh -c 'printf "%s\n" "$*"' sh -n 5 --bogus
expect_status 0 "program arguments"
[ "$(cat "$T/out")" = "-n 5 --bogus" ] || fail "program arguments mangled: $(cat "$T/out")"

note "the cmserver must be found"
CHANMEM_CMSERVER=$T/no-cmserver
export CHANMEM_CMSERVER
run_cmrun -n 1 true
unset CHANMEM_CMSERVER
expect_status 1 "missing cmserver"
expect_err "CHANMEM_CMSERVER: cannot run" "missing cmserver"
finish
