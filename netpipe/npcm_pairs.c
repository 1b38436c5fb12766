/* One size on every pair. The leader (rank 0) tells every other rank the size, the repeat count
 * and the number of trials; each trial starts on every pair at once (a barrier, with more than
 * one pair) and each transmitter (rank 2i) times its own exchanges with rank 2i+1 and sends its
 * one-way time to the leader. Only the leader's own time feeds the next repeat count, so the
 * other clocks decide nothing: a replayed rank re-takes every decision from its log. */
#include "npcm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One ping-pong trial on a transmitter: returns the seconds spent communicating. With verification,
 * the clock stops while a reply is checked, so the check does not count as transport time;
 * the receiver checks its copy after replying, in the shadow of the transmitter's check. */
static double pingpong_transmit(struct bench *b, long long size, long long nrepeat)
{
	MPI_Request req;
	double total = 0.0, start = 0.0;
	if (b->opt.async_recv)
		post_recv(b, b->received, size, &req);
	if (!b->opt.verify)
		start = MPI_Wtime();
	for (b->rep = 0; b->rep < nrepeat; b->rep++) {
		if (b->opt.verify)
			start = MPI_Wtime();
		send_data(b, size);
		long long count = b->received++;
		if (b->opt.async_recv) {
			MPI_Wait(&req, MPI_STATUS_IGNORE);
			if (b->rep + 1 < nrepeat)
				post_recv(b, b->received, size, &req);
		} else {
			recv_data(b, count, size);
		}
		if (b->opt.verify) {
			total += MPI_Wtime() - start;
			verify(b, count, size);
		}
	}
	if (!b->opt.verify)
		total = MPI_Wtime() - start;
	return total;
}

static void pingpong_receive(struct bench *b, long long size, long long nrepeat)
{
	MPI_Request req;
	if (b->opt.async_recv)
		post_recv(b, b->received, size, &req);
	for (b->rep = 0; b->rep < nrepeat; b->rep++) {
		long long count = b->received++;
		if (b->opt.async_recv) {
			MPI_Wait(&req, MPI_STATUS_IGNORE);
			if (b->rep + 1 < nrepeat)
				post_recv(b, b->received, size, &req); /* the other buffer */
		} else {
			recv_data(b, count, size);
		}
		send_data(b, size);
		verify(b, count, size);
	}
}

/* Streaming: the transmitter sends nrepeat messages back to back, the receiver replies once when
 * it has them all. The receiver's check is part of the measured time here (-x for peak figures). */
static double stream_transmit(struct bench *b, long long size, long long nrepeat)
{
	int ack = 0;
	double start = MPI_Wtime();
	for (b->rep = 0; b->rep < nrepeat; b->rep++)
		send_data(b, size);
	MPI_Recv(&ack, (int)sizeof ack, MPI_BYTE, b->src, TAG_ACK, MPI_COMM_WORLD,
	         MPI_STATUS_IGNORE);
	double total = MPI_Wtime() - start;
	if (ack != (int)nrepeat) {
		fprintf(stderr, "NPcm: rank %d: receiver acknowledged %d messages, sent %lld\n",
		        b->rank, ack, nrepeat);
		MPI_Abort(MPI_COMM_WORLD, EXIT_VERIFY);
	}
	return total;
}

static void stream_receive(struct bench *b, long long size, long long nrepeat)
{
	MPI_Request req[2];
	long long first = b->received;
	if (b->opt.async_recv) /* two receives in flight: one lands while the other is checked */
		for (long long k = 0; k < 2 && k < nrepeat; k++)
			post_recv(b, first + k, size, &req[(first + k) % 2]);
	for (b->rep = 0; b->rep < nrepeat; b->rep++) {
		long long count = b->received++;
		if (b->opt.async_recv)
			MPI_Wait(&req[count % 2], MPI_STATUS_IGNORE);
		else
			recv_data(b, count, size);
		verify(b, count, size);
		if (b->opt.async_recv && b->rep + 2 < nrepeat)
			post_recv(b, count + 2, size, &req[count % 2]);
	}
	int ack = (int)nrepeat;
	MPI_Send(&ack, (int)sizeof ack, MPI_BYTE, b->peer, TAG_ACK, MPI_COMM_WORLD);
}

static int is_transmitter(const struct bench *b)
{
	return b->rank % 2 == 0;
}

/* One trial of this rank's pair; a transmitter returns its one-way seconds per message. With
 * one pair the barrier is -r's alone (NetPIPE's two-rank run, unchanged); with several it lines
 * the pairs up so they all run the trial at the same time. */
static double run_trial(struct bench *b, long long size, long long nrepeat)
{
	if (b->opt.reset || b->pairs > 1)
		MPI_Barrier(MPI_COMM_WORLD);
	if (is_transmitter(b))
		return b->opt.streaming ? stream_transmit(b, size, nrepeat) / (double)nrepeat
		                        : pingpong_transmit(b, size, nrepeat) / (2.0 * nrepeat);
	if (b->opt.streaming)
		stream_receive(b, size, nrepeat);
	else
		pingpong_receive(b, size, nrepeat);
	return 0.0;
}

/* NetPIPE's Mbps: bits / (seconds * 2^20). */
static double mbps(long long size, double seconds)
{
	return seconds > 0.0 ? (double)size * 8.0 / (seconds * 1048576.0) : 0.0;
}

/* The leader: its own time and every other transmitter's, for one trial. A time is an input
 * like any other: a value no clock gives stops the run. */
static void gather(struct bench *b, long long size, double own, struct result *trial)
{
	double sum = own, rate = mbps(size, own);
	*trial = (struct result){.aggregate = rate, .slowest = rate, .fastest = rate};
	for (int r = 2; r < b->nranks; r += 2) {
		double t = -1.0;
		MPI_Recv(&t, (int)sizeof t, MPI_BYTE, r, TAG_TIME, MPI_COMM_WORLD,
		         MPI_STATUS_IGNORE);
		if (!isfinite(t) || t < 0.0 || t > 3600.0) {
			fprintf(stderr,
			        "NPcm: rank %d sent a one-way time of %g s for %lld bytes\n", r, t,
			        size);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		rate = mbps(size, t);
		sum += t;
		trial->aggregate += rate;
		trial->slowest = rate < trial->slowest ? rate : trial->slowest;
		trial->fastest = rate > trial->fastest ? rate : trial->fastest;
	}
	trial->mean = b->pairs > 1 ? sum / b->pairs : own;
}

/* The leader: announces (size, nrepeat, trials) to every other rank, runs the trials on its own
 * pair, and keeps the trial with the lowest mean one-way time. */
void measure(struct bench *b, long long size, long long nrepeat, int trials, struct result *out)
{
	struct control ctl = {size, nrepeat, trials};
	for (int r = 0; r < b->nranks; r++)
		if (r != b->rank)
			MPI_Send(&ctl, (int)sizeof ctl, MPI_BYTE, r, TAG_CTRL, MPI_COMM_WORLD);
	clear_buffers(b, size);
	double own_best = -1.0;
	for (b->trial = 0; b->trial < trials; b->trial++) {
		double own = run_trial(b, size, nrepeat);
		struct result trial;
		gather(b, size, own, &trial);
		if (b->trial == 0 || trial.mean < out->mean)
			*out = trial;
		if (own_best < 0.0 || own < own_best)
			own_best = own;
	}
	out->leader_best = own_best;
}

void announce_done(struct bench *b)
{
	struct control done = {0, 0, 0};
	for (int r = 0; r < b->nranks; r++)
		if (r != b->rank)
			MPI_Send(&done, (int)sizeof done, MPI_BYTE, r, TAG_CTRL, MPI_COMM_WORLD);
}

/* Every rank but the leader: follows the leader's control messages until told to stop.
 * Validates them like any input. */
void follow(struct bench *b)
{
	for (;;) {
		struct control ctl;
		MPI_Recv(&ctl, (int)sizeof ctl, MPI_BYTE, b->ctl_src, TAG_CTRL, MPI_COMM_WORLD,
		         MPI_STATUS_IGNORE);
		if (ctl.nrepeat == 0)
			return;
		if (ctl.size < 0 || ctl.size > b->max_len || ctl.nrepeat < 0 ||
		    ctl.nrepeat > MAX_REPS || ctl.trials < 1 || ctl.trials > MAX_TRIALS) {
			fprintf(
			    stderr,
			    "NPcm: rank %d: bad control message (size %lld, repeats %lld, trials "
			    "%lld): are all ranks running the same NPcm with the same options?\n",
			    b->rank, ctl.size, ctl.nrepeat, ctl.trials);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		clear_buffers(b, ctl.size);
		for (b->trial = 0; b->trial < ctl.trials; b->trial++) {
			double t = run_trial(b, ctl.size, ctl.nrepeat);
			if (is_transmitter(b))
				MPI_Send(&t, (int)sizeof t, MPI_BYTE, LEADER, TAG_TIME,
				         MPI_COMM_WORLD);
		}
	}
}
