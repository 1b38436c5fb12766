#!/bin/bash
# The habits users bring from other MPIs: --version on every program,
# mpirun's -np and its lookup of the program in the current directory,
# mpicc without arguments printing its usage, Open MPI's --showme forms, and
# NPcm --help as a GNU program answers it.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
need_cmserver
[ -x "$CMCC" ] || skip "cmcc not built (CMCC='$CMCC')"

note "--version"
for prog in "$CMRUN" "$CKPTSERVER_BIN" "$CMCC" "$NPCM"; do
	name=${prog##*/}
	name=${name%-uninstalled}
	out=$("$prog" --version 2>&1) || fail "$name --version: exit status $?"
	[[ $out =~ ^$name\ \(chanmem\)\ [0-9]+\.[0-9]+ ]] ||
		fail "$name --version printed '$out'"
done

note "cmrun -np N PROGRAM from the current directory"
mkdir -p "$T/app"
cat >"$T/app/hello.c" <<'PROG'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("hello from %d of %d\n", rank, size);
	MPI_Finalize();
	return 0;
}
PROG
(cd "$T/app" && "$CMCC" -o hello hello.c) || fail "cmcc -o hello hello.c"
cd "$T/app" || itest_hard_error "cd $T/app"
run_cmrun -np 3 hello
expect_status 0 "cmrun -np 3 hello"
[ "$(sort "$T/out")" = "$(printf 'hello from %d of 3\n' 0 1 2)" ] ||
	fail "cmrun -np 3 hello printed: $(cat "$T/out")"
run_cmrun --np 2 --tag-output hello
expect_status 0 "cmrun --np 2 hello"
run_cmrun -np
expect_status 2 "cmrun -np"
expect_err "option '-np' needs a value" "cmrun -np"
run_cmrun -n 2 no-such-program-here
expect_status 127 "missing program"
expect_err "no such program in PATH or the current directory" "missing program"
cd / || itest_hard_error "cd /"

note "cmcc"
rc=0
"$CMCC" >"$T/out" 2>"$T/err" || rc=$?
expect_status 2 "cmcc without arguments"
grep -q '^Usage: cmcc' "$T/err" || fail "cmcc without arguments: $(cat "$T/err")"
grep -q 'main' "$T/err" && fail "cmcc without arguments ran the linker: $(cat "$T/err")"
"$CMCC" --help | grep -q -- '--showme:link' || fail "cmcc --help lacks --showme:link"
[[ $("$CMCC" --showme:compile) == -I*/client ]] || fail "cmcc --showme:compile: $("$CMCC" --showme:compile)"
link=$("$CMCC" --showme:link)
[[ $link == -L*-lchanmem* ]] || fail "cmcc --showme:link: $link"
# The flags alone build the program, as build systems use them.
cc $("$CMCC" --showme:compile) -o "$T/hello2" "$T/app/hello.c" $link ||
	fail "cc with cmcc's --showme flags"

note "NPcm --help"
rc=0
"$NPCM" --help >"$T/out" 2>"$T/err" || rc=$?
expect_status 0 "NPcm --help"
grep -q '^usage: NPcm' "$T/out" || fail "NPcm --help printed no usage"
[ -s "$T/err" ] && fail "NPcm --help wrote to stderr: $(cat "$T/err")"
finish
