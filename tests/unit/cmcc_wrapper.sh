#!/bin/sh
# cmcc, the compiler wrapper (the build tree's cmcc-uninstalled): -show,
# compile-only versus link flags, arguments passed through in order and
# intact, the compiler's exit status, and a program it builds that runs
# without LD_LIBRARY_PATH.
set -u
CMCC=${CMCC:-$(pwd)/../client/cmcc-uninstalled}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cmcc_wrapper.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

expect_eq() { # what got want
	[ "$2" = "$3" ] || fail "$1: got [$2], want [$3]"
}

[ -x "$CMCC" ] || { echo "FAIL: $CMCC is not built" >&2; exit 1; }

# The include and library directories it adds, read from a -show line.
line=$(CHANMEM_CC=cc "$CMCC" -show -O2 -o app app.c)
inc=$(printf '%s\n' "$line" | sed -n 's/^cc -I\([^ ]*\) .*/\1/p')
lib=$(printf '%s\n' "$line" | sed -n 's/.* -L\([^ ]*\) .*/\1/p')
[ -f "$inc/mpi.h" ] || fail "-show: include dir '$inc' has no mpi.h"
case $line in
"cc -I$inc -O2 -o app app.c -L$lib -Wl,-rpath,$lib -lchanmem -lm -pthread" | \
	"cc -I$inc -O2 -o app app.c -L$lib -Wl,-rpath,$lib -lchanmem -lm -pthread -fsanitize="*) ;;
*) fail "link -show: got [$line]" ;;
esac

for flag in -c -E -S -M -MM -fsyntax-only; do
	line=$(CHANMEM_CC=cc "$CMCC" $flag x.c -show)
	expect_eq "$flag -show" "$line" "cc -I$inc $flag x.c"
done
line=$(CHANMEM_CC=cc "$CMCC" -showme -c x.c)
expect_eq "-showme" "$line" "cc -I$inc -c x.c"

# -show quotes what the shell would split, and never runs the compiler.
line=$(CHANMEM_CC=false "$CMCC" -show -c 'a b.c' "it's" -DX='"y"')
expect_eq "-show quoting" "$line" "false -I$inc -c 'a b.c' 'it'\\''s' '-DX=\"y\"'"

# Arguments reach the compiler one by one, in order; its status comes back.
cat >"$tmp/fakecc" <<'FAKE'
#!/bin/sh
for a; do printf '<%s>\n' "$a"; done
exit 3
FAKE
chmod +x "$tmp/fakecc"
out=$(CHANMEM_CC="$tmp/fakecc" "$CMCC" -c 'two words.c' -o '' -DQ='"*"')
status=$?
expect_eq "exit status" "$status" 3
expect_eq "arguments" "$out" "$(printf '<%s>\n' "-I$inc" -c 'two words.c' -o '' '-DQ="*"')"

# A real program: compile and link in one step, and in two; it runs
# without LD_LIBRARY_PATH (rpath) and sees the library it was built with.
cat >"$tmp/hello.c" <<'PROG'
#include <mpi.h>
#include <chanmem.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
	int rank, size;
	const char *transport;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	chanmem_transport_name(&transport);
	printf("rank %d of %d over %s, chanmem %s\n", rank, size, transport,
	       strcmp(chanmem_version(), CHANMEM_VERSION) == 0 ? "matches" : "differs");
	MPI_Finalize();
	return 0;
}
PROG
if "$CMCC" -o "$tmp/hello" "$tmp/hello.c"; then
	out=$(env -u LD_LIBRARY_PATH -u CHANMEM_RANK "$tmp/hello")
	expect_eq "program output" "$out" "rank 0 of 1 over direct, chanmem matches"
else
	fail "cmcc -o hello hello.c"
fi
if "$CMCC" -c -o "$tmp/hello.o" "$tmp/hello.c" && "$CMCC" -o "$tmp/hello2" "$tmp/hello.o"; then
	out=$(env -u LD_LIBRARY_PATH -u CHANMEM_RANK "$tmp/hello2")
	expect_eq "two-step output" "$out" "rank 0 of 1 over direct, chanmem matches"
else
	fail "cmcc -c then cmcc -o"
fi

# A compile error is the compiler's failure status, not swallowed.
printf 'int main(void) { return undeclared; }\n' >"$tmp/bad.c"
if "$CMCC" -o "$tmp/bad" "$tmp/bad.c" 2>/dev/null; then
	fail "a broken program compiled"
fi

[ "$failures" -eq 0 ] || exit 1
echo "cmcc_wrapper: all checks passed"
