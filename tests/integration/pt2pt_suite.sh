# The point-to-point suite, run once per transport by pt2pt_direct.sh and
# pt2pt_cm.sh (sourced after lib.sh). Both transports compare against the same
# expected outputs, so a program prints exactly the same over either.
#
# pt2pt_suite TRANSPORT
pt2pt_suite() {
	local t=$1
	local via=(--transport "$t")
	itest_setup
	itest_log "point-to-point suite over transport '$t' (launcher $ITEST_LAUNCHER)"

	itest_expect_success hello hello 4 "${via[@]}" -- hello
	itest_expect_success pingpong_sizes pingpong_sizes 2 "${via[@]}" -- pingpong_sizes
	itest_expect_success matching matching 4 "${via[@]}" -- matching
	itest_expect_success order order 4 "${via[@]}" -- order
	itest_expect_success ssend ssend 2 "${via[@]}" -- ssend
	itest_expect_success truncate truncate 2 "${via[@]}" -- truncate
	itest_expect_success errors errors 2 "${via[@]}" -- errors
	itest_expect_success alltoall_64 alltoall_64 64 "${via[@]}" -- alltoall
	if [ "$t" = cm ]; then
		# Several channel memories: a sender's clock reaches each CM with gaps.
		itest_expect_success alltoall_64_cms4 alltoall_64 64 "${via[@]}" --cms 4 -- alltoall
		itest_expect_success order_cms2 order 4 "${via[@]}" --cms 2 -- order
		itest_expect_success matching_cms3 matching 4 "${via[@]}" --cms 3 -- matching
	fi

	# Failure modes: exit status and the runtime's message on stderr.
	itest_expect_failure truncate_fatal 1 'chanmem: rank 0: MPI_Recv: .*trunc' \
		2 "${via[@]}" -- truncate fatal
	itest_expect_failure errors_fatal 1 'chanmem: rank 0: MPI_Send: ' \
		2 "${via[@]}" -- errors fatal
	itest_expect_failure errors_abort 7 'chanmem: rank 1: MPI_Abort\(7\)' \
		3 "${via[@]}" -- errors abort

	itest_finish
}
