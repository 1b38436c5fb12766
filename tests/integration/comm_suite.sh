# The communicator / datatype / request suite, run over each transport by
# comm_direct.sh and comm_cm.sh (sourced after lib.sh, between itest_setup
# and itest_finish). Every run compares against the same expected outputs,
# made under Open MPI (ITEST_LAUNCHER=ompi runs the suite there).
#
# comm_suite SUFFIX CANCEL [CMRUN OPTIONS...]
#   SUFFIX   appended to the job names (one work file per job)
#   CANCEL   misc_requests' cancel mode: must-cancel where a posted receive
#            can be withdrawn (direct transport, Open MPI), may-complete where
#            it cannot (cm transport: the receive lives at the channel memory)
comm_suite() {
	local sfx=$1 cancel=$2 bsend=strict
	shift 2
	local via=("$@")
	if [ "$ITEST_LAUNCHER" = ompi ]; then
		cancel=must-cancel
		bsend=lenient # Open MPI does not report MPI_ERR_BUFFER
	fi
	itest_log "communicator and datatype suite: $* (launcher $ITEST_LAUNCHER)"

	itest_expect_success "comm_split$sfx" comm_split 6 "${via[@]}" -- comm_split
	itest_expect_success "comm_groups$sfx" comm_groups 5 "${via[@]}" -- comm_groups
	itest_expect_success "comm_cart$sfx" comm_cart 7 "${via[@]}" -- comm_cart
	itest_expect_success "dtype_layouts$sfx" dtype_layouts 2 "${via[@]}" -- dtype_layouts
	itest_expect_success "dtype_pack$sfx" dtype_pack 2 "${via[@]}" -- dtype_pack
	itest_expect_success "misc_requests$sfx" misc_requests 3 "${via[@]}" -- misc_requests \
		"$cancel"
	itest_expect_success "misc_bsend$sfx" misc_bsend 2 "${via[@]}" -- misc_bsend "$bsend"
	itest_expect_success "misc_env$sfx" misc_env 3 "${via[@]}" -- misc_env
}
