/* The cost model that picks a collective algorithm (docs/collectives.md
 * explains it and lists the choices it makes).
 *
 * pLogP terms, in nanoseconds: a message of m bytes costs its sender the gap
 * g(m) = o + m*G and reaches its receiver L later; combining m bytes costs
 * m*GAMMA, copying them locally m*COPY. An algorithm's time on its critical
 * path is T_path. Under the cm transport every byte also crosses a channel
 * memory, and the CMs are shared by every rank: with K CMs serving the
 * communicator, moving B bytes in M messages takes at least
 * max(B*G_RELAY, M*MSG_RELAY)/K, the CMs' copying or their work per message
 * (the larger: a CM copies one message while it reads the next ones'
 * headers). The estimate is the larger of that and T_path (without relays,
 * T_path), plus T_path/1000 so that between two schemes both bound by the
 * relays the shorter critical path wins.
 *
 * The inputs are identical on every rank (byte counts, communicator size,
 * transport, CM homes of the members), and the constants are constants, not
 * measurements: every rank, and every re-execution of a rank after a
 * failure, chooses the same algorithm. */
#include <string.h>

#include "mpi_coll_internal.h"

struct model {
	double L, o, G, g_relay, msg_relay, gamma, copy;
	int relays; /* CMs serving the communicator; 0: no relay */
};

/* Ping-pong figures on loopback (docs/collectives.md). Under cm, G
 * includes the store-and-forward copy through the CM, and msg_relay is
 * what one message of a collective costs the CM beyond its bytes (reading
 * and logging it, pushing it to its receiver): about 3 us, from
 * back-to-back collectives through one CM on 4 ranks, whose time per call
 * grows with the number of messages they send. */
static const struct model direct_model = {4500, 1000, 0.3, 0, 0, 0.3, 0.1, 0};
static const struct model relayed_model = {12000, 2000, 0.9, 0.6, 3000, 0.3, 0.1, 1};

/* Number of distinct channel memories homing c's members. No allocation:
 * a failure could not be allowed to change the answer on one rank only. */
#define MAX_COUNTED_CMS 4096 /* as many as the job environment allows */
static int count_relays(const struct cm_mpi_comm *c)
{
	const struct cm_job *job = &cm_mpi.job;
	if (job->ncms <= 1 || !job->home)
		return 1;
	unsigned char seen[MAX_COUNTED_CMS / 8] = {0};
	int k = 0;
	for (int r = 0; r < c->size; r++) {
		int home = job->home[cm_mpi_world_rank(c, r)];
		if (home < 0 || home >= MAX_COUNTED_CMS)
			continue;
		if (!(seen[home / 8] & (1u << (home % 8)))) {
			seen[home / 8] |= (unsigned char)(1u << (home % 8));
			k++;
		}
	}
	return k > 0 ? k : 1;
}

static struct model model_of(const struct cm_mpi_comm *c)
{
	if (strcmp(cm_mpi.transport_name, "cm") != 0)
		return direct_model;
	struct model m = relayed_model;
	m.relays = count_relays(c);
	return m;
}

static double gap(const struct model *md, double m)
{
	return md->o + m * md->G;
}

/* ceil(log2 P), floor(log2 P) */
static int ceil_log2(int P)
{
	int n = 0;
	while ((1 << n) < P)
		n++;
	return n;
}

static int floor_log2(int P)
{
	int n = 0;
	while ((2 << n) <= P)
		n++;
	return n;
}

/* msgs: messages through the CMs, relayed_bytes: their bytes. */
static double estimate(const struct model *md, double path, double relayed_bytes, double msgs)
{
	double t = path;
	if (md->relays > 0) {
		double bytes = relayed_bytes * md->g_relay, frames = msgs * md->msg_relay;
		double through = (bytes > frames ? bytes : frames) / md->relays;
		if (through > t)
			t = through;
	}
	return t + path / 1000;
}

/* ---- per collective (m: bytes, P: ranks) ---- */

static double bcast_binomial(const struct model *md, int P, double m)
{
	/* the root sends ceil(log2 P) times, the last one reaches the
	 * deepest leaf after ceil(log2 P) hops */
	return estimate(md, ceil_log2(P) * (gap(md, m) + md->L), (P - 1) * m, P - 1);
}

static double bcast_chain(const struct model *md, int P, double m)
{
	/* k segments of s bytes; k taken as a real number, so that the
	 * choice does not flip back and forth as a segment fills up */
	double s = m < (double)CM_COLL_SEGMENT ? m : (double)CM_COLL_SEGMENT;
	double k = s > 0 ? m / s : 1;
	return estimate(md, (P - 1) * (gap(md, s) + md->L) + (k - 1) * gap(md, s), (P - 1) * m,
	                (P - 1) * k);
}

/* the root's P - 1 sends back to back, the last one L later at its leaf */
static double bcast_flat(const struct model *md, int P, double m)
{
	return estimate(md, (P - 1) * gap(md, m) + md->L, (P - 1) * m, P - 1);
}

static double bcast_best(const struct model *md, int P, double m, enum cm_bcast_alg *alg)
{
	double best = bcast_binomial(md, P, m), t;
	enum cm_bcast_alg a = CM_BCAST_BINOMIAL;
	/* P <= 2: one message either way */
	if (P > 2 && (t = bcast_chain(md, P, m)) < best)
		best = t, a = CM_BCAST_CHAIN;
	/* Flat only where its root sends no more messages than the tree's
	 * (P = 3). Back to back on 4 ranks the tree took 0.79 of the flat
	 * scheme's time direct and 0.95 through one CM, up to 4 KiB: the root
	 * sending P - 1 messages in a row is what bounds it, and o, from a
	 * ping-pong, understates a send on a shared core. */
	if (P > 2 && P - 1 <= ceil_log2(P) && (t = bcast_flat(md, P, m)) < best)
		best = t, a = CM_BCAST_FLAT;
	if (alg)
		*alg = a;
	return best;
}

enum cm_bcast_alg cm_coll_bcast_alg(const struct cm_mpi_comm *c, size_t bytes)
{
	struct model md = model_of(c);
	enum cm_bcast_alg alg;
	bcast_best(&md, c->size, (double)bytes, &alg);
	return alg;
}

static double reduce_binomial(const struct model *md, int P, double m)
{
	return estimate(md, ceil_log2(P) * (gap(md, m) + md->L + m * md->gamma), (P - 1) * m,
	                P - 1);
}

/* Ring reduce-scatter, then the P blocks gathered at the root. */
static double reduce_ring(const struct model *md, int P, double m)
{
	double b = m / P;
	double path = (P - 1) * (gap(md, b) + md->L + b * md->gamma) + (P - 1) * gap(md, b) + md->L;
	return estimate(md, path, (P - 1) * m + (P - 1) * b, (double)P * (P - 1) + (P - 1));
}

/* The fold of the P - p2 extra ranks before a power-of-two scheme (one
 * vector sent and combined), and the recursive halving reduce-scatter
 * among the p2 others: log2 p2 messages carrying (p2-1)/p2 of the vector,
 * as much combined. */
static double fold_in(const struct model *md, int P, double m)
{
	return P > (1 << floor_log2(P)) ? gap(md, m) + md->L + m * md->gamma : 0;
}

static double halving_path(const struct model *md, int P, double m)
{
	int f = floor_log2(P);
	double part = (double)((1 << f) - 1) / (1 << f) * m;
	return fold_in(md, P, m) + f * (md->o + md->L) + part * (md->G + md->gamma);
}

/* Halving, then the p2 blocks gathered at the root. */
static double reduce_halving(const struct model *md, int P, double m)
{
	int p2 = 1 << floor_log2(P);
	double b = m / p2;
	double path = halving_path(md, P, m) + (p2 - 1) * gap(md, b) + md->L;
	return estimate(md, path, (p2 - 1) * m + (P - p2) * m + (p2 - 1) * b,
	                (P - p2) + (double)p2 * floor_log2(P) + (p2 - 1));
}

static double reduce_best(const struct model *md, int P, double m, int ring_ok,
                          enum cm_reduce_alg *alg)
{
	double best = reduce_binomial(md, P, m), t;
	enum cm_reduce_alg a = CM_REDUCE_BINOMIAL;
	if (ring_ok && P > 2 && (t = reduce_ring(md, P, m)) < best)
		best = t, a = CM_REDUCE_RING;
	if (ring_ok && P > 2 && (t = reduce_halving(md, P, m)) < best)
		best = t, a = CM_REDUCE_HALVING;
	if (alg)
		*alg = a;
	return best;
}

enum cm_reduce_alg cm_coll_reduce_alg(const struct cm_mpi_comm *c, size_t bytes, int ring_ok)
{
	struct model md = model_of(c);
	enum cm_reduce_alg alg;
	reduce_best(&md, c->size, (double)bytes, ring_ok, &alg);
	return alg;
}

/* Recursive doubling over the largest power of two p2 <= P, the other
 * P - p2 ranks folded in before and served after. */
static double allreduce_doubling(const struct model *md, int P, double m)
{
	int steps = floor_log2(P), p2 = 1 << steps;
	double step = gap(md, m) + md->L + m * md->gamma;
	double path = steps * step + (P > p2 ? step + gap(md, m) + md->L : 0);
	return estimate(md, path, (double)p2 * steps * m + 2.0 * (P - p2) * m,
	                (double)p2 * steps + 2.0 * (P - p2));
}

/* Ring reduce-scatter, then ring allgather. */
static double allreduce_ring(const struct model *md, int P, double m)
{
	double b = m / P;
	double path = 2.0 * (P - 1) * (gap(md, b) + md->L) + (P - 1) * b * md->gamma;
	return estimate(md, path, 2.0 * (P - 1) * m, 2.0 * P * (P - 1));
}

/* Halving, then recursive doubling of the blocks, then the result to the
 * folded ranks. */
static double allreduce_halving(const struct model *md, int P, double m)
{
	int f = floor_log2(P), p2 = 1 << f;
	double path = halving_path(md, P, m) + f * (md->o + md->L) +
	              (double)(p2 - 1) / p2 * m * md->G + (P > p2 ? gap(md, m) + md->L : 0);
	return estimate(md, path, 2.0 * (p2 - 1) * m + 2.0 * (P - p2) * m,
	                2.0 * p2 * f + 2.0 * (P - p2));
}

enum cm_allreduce_alg cm_coll_allreduce_alg(const struct cm_mpi_comm *c, size_t bytes, int ring_ok)
{
	struct model md = model_of(c);
	int P = c->size;
	double m = (double)bytes;
	double best = allreduce_doubling(&md, P, m);
	enum cm_allreduce_alg alg = CM_ALLREDUCE_DOUBLING;
	if (P <= 2)
		return alg;
	double t = reduce_best(&md, P, m, ring_ok, NULL) + bcast_best(&md, P, m, NULL);
	if (t < best) {
		best = t;
		alg = CM_ALLREDUCE_REDUCE_BCAST;
	}
	if (ring_ok && (t = allreduce_ring(&md, P, m)) < best) {
		best = t;
		alg = CM_ALLREDUCE_RING;
	}
	if (ring_ok && allreduce_halving(&md, P, m) < best)
		alg = CM_ALLREDUCE_HALVING;
	return alg;
}

/* Bruck: ceil(log2 P) messages carrying (P-1)/P of the result, which is
 * copied twice more (packing, final rotation). */
static double allgather_bruck(const struct model *md, int P, double m)
{
	double path = ceil_log2(P) * (md->o + md->L) + (P - 1) * (m / P) * md->G + 2 * m * md->copy;
	return estimate(md, path, (P - 1) * m, (double)P * ceil_log2(P));
}

static double allgather_ring(const struct model *md, int P, double m)
{
	return estimate(md, (P - 1) * (gap(md, m / P) + md->L), (P - 1) * m, (double)P * (P - 1));
}

enum cm_allgather_alg cm_coll_allgather_alg(const struct cm_mpi_comm *c, size_t bytes)
{
	struct model md = model_of(c);
	double m = (double)bytes;
	return allgather_ring(&md, c->size, m) < allgather_bruck(&md, c->size, m)
	           ? CM_ALLGATHER_RING
	           : CM_ALLGATHER_BRUCK;
}

enum cm_scan_alg cm_coll_scan_alg(const struct cm_mpi_comm *c, size_t bytes)
{
	struct model md = model_of(c);
	int P = c->size;
	double m = (double)bytes;
	double doubling = estimate(&md, ceil_log2(P) * (gap(&md, m) + md.L + 2 * m * md.gamma),
	                           (double)P * floor_log2(P) * m, (double)P * floor_log2(P));
	double chain =
	    estimate(&md, (P - 1) * (gap(&md, m) + md.L + m * md.gamma), (P - 1) * m, P - 1);
	return chain < doubling ? CM_SCAN_CHAIN : CM_SCAN_DOUBLING;
}

enum cm_reduce_scatter_alg cm_coll_reduce_scatter_alg(const struct cm_mpi_comm *c, size_t bytes,
                                                      int ring_ok)
{
	struct model md = model_of(c);
	int P = c->size;
	double m = (double)bytes, b = m / P;
	if (!ring_ok || P <= 2)
		return CM_REDUCE_SCATTER_REDUCE;
	double via_reduce = reduce_best(&md, P, m, ring_ok, NULL) +
	                    estimate(&md, (P - 1) * gap(&md, b) + md.L, (P - 1) * b, P - 1);
	double ring = estimate(&md, (P - 1) * (gap(&md, b) + md.L + b * md.gamma), (P - 1) * m,
	                       (double)P * (P - 1));
	return ring < via_reduce ? CM_REDUCE_SCATTER_RING : CM_REDUCE_SCATTER_REDUCE;
}

/* Pairwise exchange: every rank sends its P - 1 blocks of b bytes at once
 * (in batches of 8), one latency. Bruck: ceil(log2 P) steps of P/2 blocks
 * or fewer, each copied out and in. Bruck only while a step's message is
 * short enough to ride with the RECV_REQ (cm_coll_send_first): through one
 * CM on 4 ranks it was 4% faster up to 1 KiB blocks, and slower from 2 KiB
 * (1.1x at 4 KiB, 2.2x at 8 KiB), where its longer dependent steps cost
 * more than the messages it saves. */
int cm_coll_alltoall_bruck(const struct cm_mpi_comm *c, size_t block)
{
	struct model md = model_of(c);
	int P = c->size, n = ceil_log2(P);
	double b = (double)block, batches = (P - 1 + 7) / 8;
	double half = (double)(P / 2) * b;
	double pairwise = estimate(&md, (P - 1) * gap(&md, b) + batches * md.L,
	                           (double)P * (P - 1) * b, (double)P * (P - 1));
	double bruck = estimate(&md, n * (gap(&md, half) + md.L + 2 * half * md.copy),
	                        (double)P * n * half, (double)P * n);
	return P > 2 && cm_coll_send_first((size_t)half) && bruck < pairwise;
}
