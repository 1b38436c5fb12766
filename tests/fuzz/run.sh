#!/bin/bash
# Builds the libFuzzer targets (clang -fsanitize=fuzzer,address,undefined,
# straight from the sources: the main build may use gcc) and runs each from
# its checked-in seed corpus for a bounded time and number of runs. Any
# crash, leak, sanitizer report or timeout fails; the input that caused it
# is kept as an artifact in the work directory and printed.
#   FUZZ_SECONDS  per target (default 20; 0 skips)  FUZZ_RUNS  per target (default 2000000)
#   FUZZ_TARGETS  subset (default all)        FUZZ_WORK  build/run directory
# Skips (77) without a clang that links -fsanitize=fuzzer (Debian: clang,
# libclang-rt-dev); scripts/setup.sh installs them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${TOP_SRCDIR:-$(cd "$here/../.." && pwd)}
build=${TOP_BUILDDIR:-$src/build}
work=${FUZZ_WORK:-$build/tests/fuzz-work}
seconds=${FUZZ_SECONDS:-20}
runs=${FUZZ_RUNS:-2000000}
targets=${FUZZ_TARGETS:-frame session ckpt ctrl_line hosts units cmdline}
CLANG=${CLANG:-clang}

skip() {
	echo "SKIP: $*"
	exit 77
}

[ "$seconds" != 0 ] || skip "FUZZ_SECONDS=0 (the targets are sanitized builds of their own: one suite runs them)"
[ -f "$build/config.h" ] || skip "no config.h in $build (configure first)"
command -v "$CLANG" >/dev/null || skip "no clang (apt-get install clang libclang-rt-dev)"
mkdir -p "$work" || exit 99
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
	>"$work/probe.c"
"$CLANG" -fsanitize=fuzzer,address "$work/probe.c" -o "$work/probe" 2>/dev/null ||
	skip "$CLANG cannot link -fsanitize=fuzzer (apt-get install libclang-rt-dev)"

common="$src/common/protocol.c $src/common/units.c $src/common/log.c $src/common/secret.c $src/common/net.c"
common="$common $src/common/cmdline.c"
core="$src/cmserver/core.c $src/cmserver/session.c $src/cmserver/input.c $src/cmserver/emit.c"
core="$core $src/cmserver/record.c $src/cmserver/cut.c $src/cmserver/msglog.c $src/cmserver/msgrec.c $src/cmserver/push.c $src/cmserver/logmem.c $src/cmserver/recover.c"
flags=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 -std=gnu11
	-pthread -Wall -Wno-unused-parameter -DHAVE_CONFIG_H -I"$build" -I"$src/common"
	-I"$src/cmserver" -I"$src/checkpoint" -I"$src/dispatcher" -I"$src/netpipe" -I"$src/client")

sources() {
	case $1 in
	frame) echo "$here/fuzz_frame.c $common" ;;
	session) echo "$here/fuzz_session.c $core $common" ;;
	ckpt) echo "$here/fuzz_ckpt.c $src/checkpoint/ckpt_proto.c $common" ;;
	ctrl_line) echo "$here/fuzz_ctrl_line.c $src/dispatcher/ctrl_line.c $common" ;;
	hosts) echo "$here/fuzz_hosts.c $src/dispatcher/hosts.c $common" ;;
	units) echo "$here/fuzz_units.c $common" ;;
	# Every program's parser; name lookups are stubbed (see the target).
	cmdline) echo "$here/fuzz_cmdline.c $src/dispatcher/options.c $src/dispatcher/launch.c" \
		"$src/dispatcher/hosts.c $src/cmserver/cli.c $src/checkpoint/ckpt_cli.c" \
		"$src/checkpoint/ckpt_proto.c" \
		"$src/netpipe/npcm_options.c $common -DCHANMEM -lzstd -Wl,--wrap=getaddrinfo" ;;
	*) return 1 ;;
	esac
}

failed=0
for t in $targets; do
	srcs=$(sources "$t") || {
		echo "FAIL: unknown fuzz target '$t'"
		failed=1
		continue
	}
	bin=$work/fuzz_$t
	# shellcheck disable=SC2086
	if ! "$CLANG" "${flags[@]}" $srcs -o "$bin" -lm 2>"$work/$t.build.log"; then
		echo "FAIL: $t does not build:"
		head -n 20 "$work/$t.build.log"
		failed=1
		continue
	fi
	mkdir -p "$work/corpus_$t"
	rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$bin" -max_total_time="$seconds" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
		-malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" \
		"$work/corpus_$t" "$here/corpus/$t" >"$work/$t.log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: fuzz_$t (exit $rc after ${execs:-?} runs):"
		grep -m 30 -E 'ERROR|SUMMARY|runtime error|#[0-9]+ 0x|Test unit written' "$work/$t.log"
		failed=1
	else
		echo "PASS: fuzz_$t: ${execs:-?} runs, 0 crashes, 0 leaks, 0 timeouts"
	fi
done
exit $failed
