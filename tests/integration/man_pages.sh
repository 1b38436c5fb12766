#!/bin/bash
# The manual pages: each renders with man -l without a warning, names every
# option its program's --help lists, has the OPTIONS section its program's
# option table generates, and make install puts them under man1/man7 of the
# prefix.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
command -v man >/dev/null 2>&1 || skip "man not installed (Debian package man-db)"
[ -d "$MAN_BUILDDIR" ] || skip "no man directory (MAN_BUILDDIR='$MAN_BUILDDIR')"
note "make -C man, man -l of every page"
make -s -C "$MAN_BUILDDIR" >/dev/null || fail "make -C man"

render() { # PAGE: the page as plain text on stdout, warnings on stderr
	LC_ALL=C MANWIDTH=80 MANPAGER=cat MAN_KEEP_FORMATTING= man --warnings -l "$1" | col -b
}

for page in cmrun.1 cmserver.1 ckptserver.1 cmcc.1 NPcm.1 chanmem.7; do
	render "$MAN_BUILDDIR/$page" >"$T/$page.txt" 2>"$T/$page.err" ||
		fail "man -l $page: $(cat "$T/$page.err")"
	[ -s "$T/$page.err" ] && fail "man -l $page warns: $(head -5 "$T/$page.err")"
	grep -q '^NAME' "$T/$page.txt" || fail "$page has no NAME section"
	grep -q '@VERSION@' "$T/$page.txt" && fail "$page: @VERSION@ left unreplaced"
done

# check_options PROGRAM PAGE HELP-TEXT: every option HELP-TEXT lists (the
# leading words starting with '-' of its indented lines) is in PAGE.
check_options() {
	local prog=$1 page=$2 help=$3 opt missing=""
	for opt in $(awk '/^ +-/ { for (i = 1; i <= NF && $i ~ /^-/; i++) { sub(/,$/, "", $i); print $i } }' <<<"$help" | sort -u); do
		grep -qF -- "$opt" "$T/$page.txt" || missing="$missing $opt"
	done
	[ -z "$missing" ] || fail "$page lacks options of $prog --help:$missing"
}
note "every option of --help is in the page"
check_options cmrun cmrun.1 "$("$CMRUN" --help)"
check_options cmserver cmserver.1 "$("$CMSERVER" --help)"
check_options ckptserver ckptserver.1 "$("$CKPTSERVER_BIN" --help)"
check_options NPcm NPcm.1 "$("$NPCM" --help)"
check_options cmcc cmcc.1 "$("$CMCC" --help 2>&1)"

# The OPTIONS sections are generated from the programs' option tables:
# each must be exactly what the program prints with --help-man.
same_options() { # PROGRAM PAGE
	local prog=$1 page=$2
	sed -n '/^\.SH OPTIONS$/,/^\.SH /p' "$MAN_BUILDDIR/$page" | sed '1d;$d' >"$T/$page.opts"
	"$prog" --help-man >"$T/$page.want" || fail "$prog --help-man failed"
	[ -s "$T/$page.want" ] || fail "$prog --help-man printed nothing"
	cmp -s "$T/$page.opts" "$T/$page.want" ||
		fail "$page: OPTIONS differ from $prog --help-man: $(diff "$T/$page.want" "$T/$page.opts" | head -5)"
}
note "the OPTIONS sections are those of --help-man"
same_options "$CMRUN" cmrun.1
same_options "$CMSERVER" cmserver.1
same_options "$CKPTSERVER_BIN" ckptserver.1
same_options "$NPCM" NPcm.1

note "make install"
make -s -C "$MAN_BUILDDIR" install DESTDIR="$T/inst" prefix=/opt/cm >/dev/null ||
	fail "make -C man install"
for page in man1/cmrun.1 man1/cmserver.1 man1/ckptserver.1 man1/cmcc.1 man1/NPcm.1 man7/chanmem.7; do
	[ -s "$T/inst/opt/cm/share/man/$page" ] || fail "make install did not install $page"
done
MANPATH="$T/inst/opt/cm/share/man" LC_ALL=C MANPAGER=cat man cmrun 2>/dev/null |
	grep -q 'cmrun' || fail "man cmrun finds nothing under the installed MANPATH"
finish
