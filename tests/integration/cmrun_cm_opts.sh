#!/bin/bash
# The channel memory options of cmrun (--log-mem, --spill-dir, --no-spill,
# --cut-through-min, --threads) reach every cmserver cmrun starts, locally
# and through a launch template, and a bad value is refused with status 2
# and a message before any CM is started.
. "${TESTSRC:-$(dirname "$0")/..}/dispatcher/lib.sh"
need_cmserver
CM_ARGS_FILE=$T/cm.args
CHANMEM_CMSERVER=$HELPERS/args_cmserver.sh
export CM_ARGS_FILE CHANMEM_CMSERVER

# expect_cm_args N WORDS...: N CMs were started, each with every WORD in
# its command line ("%k" stands for the CM's index).
expect_cm_args() {
	n=$1
	shift
	[ -f "$CM_ARGS_FILE" ] || fail "no cmserver was started"
	[ "$(wc -l <"$CM_ARGS_FILE")" = "$n" ] ||
		fail "expected $n cmservers, got: $(cat "$CM_ARGS_FILE")"
	for w in "$@"; do
		k=0
		while [ "$k" -lt "$n" ]; do
			want=$(printf '%s' "$w" | sed "s/%k/$k/g")
			grep -q -- " $want\( \|$\)" "$CM_ARGS_FILE" ||
				fail "no cmserver got '$want': $(cat "$CM_ARGS_FILE")"
			k=$((k + 1))
		done
	done
	rm -f "$CM_ARGS_FILE"
}

note "every local CM gets the options, in the units cmserver takes"
mkdir "$T/spill"
run_cmrun -n 2 --cms 2 -vv --mode specialized --threads 3 --log-mem 512MiB \
	--spill-dir "$T/spill" --cut-through-min 64KiB sh -c 'echo rank $CHANMEM_RANK'
expect_status 0 "CM options"
expect_cm_args 2 "--threads 3" "--log-mem 536870912" "--cut-through-min 65536" \
	"--spill-dir $T/spill"
# What cmserver itself says it runs with (-vv makes it verbose).
[ "$(grep -c "mode specialized (3 threads), .* log memory 536870912 bytes, cut-through from 65536 bytes" "$T/err")" = 2 ] ||
	fail "the cmservers do not report the options: $(cat "$T/err")"
[ -z "$(ls -A "$T/spill")" ] || fail "the CMs left files in the spill directory: $(ls -A "$T/spill")"
[ "$(sort "$T/out")" = "$(printf 'rank 0\nrank 1')" ] || fail "rank output: $(cat "$T/out")"

note "--no-spill, and a relative --spill-dir made absolute"
run_cmrun -n 1 --no-spill --log-mem 0 true
expect_status 0 "--no-spill"
expect_cm_args 1 "--no-spill" "--log-mem 0"
cd "$T" || itest_hard_error "cd $T"
run_cmrun -n 1 --spill-dir spill true
cd "$OLDPWD" || itest_hard_error "cd $OLDPWD"
expect_status 0 "relative --spill-dir"
expect_cm_args 1 "--spill-dir $T/spill"

note "the remote launch path (a template on 127.0.0.1) passes them on"
printf 'a slots=2 addr=127.0.0.1 roles=rank,cm\n' >"$T/hosts"
run_cmrun -n 2 --hosts "$T/hosts" --launch "exec {cmd}" --log-mem 64MiB --spill-dir "$T/spill" \
	--cut-through-min 0 sh -c 'echo rank $CHANMEM_RANK'
expect_status 0 "remote CM options"
expect_cm_args 1 "--log-mem 67108864" "--spill-dir $T/spill" "--cut-through-min 0"

note "bad values are refused before anything starts"
refused "--log-mem takes a size such as 512MiB, not 'lots'" -n 1 --log-mem lots true
refused "--log-mem takes a size such as 512MiB, not '-1'" -n 1 --log-mem -1 true
refused "--cut-through-min takes a size from 0 (off) to 4GiB-1" -n 1 --cut-through-min 4GiB true
refused "--threads takes a number of threads from 1 to 64, not '0'" -n 1 --mode multiplexer \
	--threads 0 true
refused "--threads applies to --mode multiplexer and specialized, not mono" -n 1 --threads 2 true
refused "--spill-dir $T/none: No such file or directory" -n 1 --spill-dir "$T/none" true
: >"$T/file"
refused "--spill-dir $T/file: not a directory" -n 1 --spill-dir "$T/file" true
refused "--no-spill and --spill-dir contradict each other" -n 1 --no-spill --spill-dir "$T" true
refused "--log-mem is a channel memory option: it applies to --transport cm only" -n 2 \
	--transport direct --log-mem 1GiB true
refused "--spill-dir spill: CMs on other hosts need an absolute directory" -n 1 \
	--hosts "$T/hosts" --launch "exec {cmd}" --spill-dir spill true
refused "option '--log-mem' needs a value" -n 1 --log-mem

note "--help documents them"
run_cmrun --help
for opt in --log-mem --spill-dir --no-spill --cut-through-min --threads; do
	grep -q -- "^ *$opt " "$T/out" || fail "--help does not document $opt"
done
finish
