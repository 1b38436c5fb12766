#!/bin/bash
# make install prefix=DIR after a default configure: the installed cmcc and
# chanmem.pc point at DIR, a program built with that cmcc runs, and the
# installed NPcm finds its libchanmem without ldconfig or LD_LIBRARY_PATH.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
need_cmserver
[ -n "$TOP_BUILDDIR" ] && [ -d "$TOP_BUILDDIR/client" ] || skip "no build tree (TOP_BUILDDIR)"
command -v pkg-config >/dev/null 2>&1 || skip "pkg-config not installed"
pfx=$T/pfx
for dir in client netpipe; do
	make -s -C "$TOP_BUILDDIR/$dir" install prefix="$pfx" >"$T/make.out" 2>&1 ||
		fail "make -C $dir install prefix=$pfx: $(tail -5 "$T/make.out")"
done
[ "$("$pfx/bin/cmcc" --showme:compile)" = "-I$pfx/include/chanmem" ] ||
	fail "installed cmcc --showme:compile: $("$pfx/bin/cmcc" --showme:compile)"
flags=$(PKG_CONFIG_PATH=$pfx/lib/pkgconfig pkg-config --cflags --libs chanmem) ||
	fail "pkg-config chanmem under $pfx"
[ "$(echo $flags)" = "-I$pfx/include/chanmem -L$pfx/lib -lchanmem" ] || fail "pkg-config chanmem: $flags"
cat >"$T/hi.c" <<'PROG'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	printf("hi %d\n", rank);
	MPI_Finalize();
	return 0;
}
PROG
"$pfx/bin/cmcc" -o "$T/hi" "$T/hi.c" || fail "installed cmcc -o hi hi.c"
run_cmrun -n 2 "$T/hi"
expect_status 0 "a program built with the installed cmcc"
run_cmrun -n 2 "$pfx/bin/NPcm" -u 16 -q -o "$T/np.out"
expect_status 0 "the installed NPcm"
[ -s "$T/np.out" ] || fail "the installed NPcm wrote no np.out"
finish
