#!/bin/bash
# Collectives and reduction operations under cmrun: every coll_* program on
# 1, 2, 3, 5 and 8 ranks over the direct transport and over the cm transport
# with one channel memory and with three (where a rank's messages reach
# several CMs). Rank counts that are not powers of two take the fold-in
# paths of the doubling schemes; the programs' sizes make the cost model
# pick each algorithm somewhere in this matrix. The output of a program is
# the same for every rank count and transport, so one expected file each.
#
# COLL_CONFIGS="direct cm cm3" (default: all three) selects configurations.
here=$(dirname "$0")
. "$here/lib.sh"

itest_setup
itest_log "collectives suite (launcher $ITEST_LAUNCHER)"

for config in ${COLL_CONFIGS:-direct cm cm3}; do
	case $config in
	direct) via=(--transport direct) ;;
	cm) via=(--transport cm) ;;
	cm3) via=(--transport cm --cms 3) ;;
	*) itest_hard_error "COLL_CONFIGS: unknown configuration '$config'" ;;
	esac
	for n in 1 2 3 5 8; do
		# 3 CMs only matter when there are ranks enough to spread.
		[ "$config" = cm3 ] && [ "$n" -lt 3 ] && continue
		for prog in coll_move coll_reduce coll_derived; do
			itest_expect_success "${prog}_${config}_$n" "$prog" "$n" "${via[@]}" -- "$prog"
		done
	done
	itest_expect_success "coll_errors_${config}_3" coll_errors 3 "${via[@]}" -- coll_errors
	# Under MPI_ERRORS_ARE_FATAL an invalid root ends the job.
	itest_expect_failure "coll_errors_fatal_$config" 1 \
		'chanmem: rank [0-9]+: MPI_Bcast: MPI_ERR_ROOT' 2 "${via[@]}" -- coll_errors fatal
done

itest_finish
