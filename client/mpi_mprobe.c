/* Matched probes: MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv.
 *
 * A matched probe must take the message it found out of matching, so that
 * no receive posted later can get it. Every transport already answers a
 * probe and matches receives in one order (per destination, messages in
 * arrival order, receives in posting order), so the probe is made as an
 * ordinary probe, and as soon as it finds a message a receive for exactly
 * its source, tag and context is posted, before the program can post
 * anything else. That receive gets the probed message: it is the earliest
 * unmatched message the probe's pattern accepts, so the earliest with its
 * own source and tag; and no receive posted earlier accepts it, or that
 * receive would have taken it when it arrived. The message is received
 * whole into a buffer of the probed length; MPI_Mrecv / MPI_Imrecv later
 * say where it goes, and it is unpacked there when the receive completes.
 *
 * Replay (cm transport): the probe and the receive are a PROBE and a
 * RECV_REQ with the rank's next request ids, so a re-executed rank gets
 * the recorded answer of the probe and the recorded message of the
 * receive: the same message as the first time. If the rank died between
 * the two, the receive is matched afresh and the same argument as above
 * makes it the probed message. Under replication the probe answer is the
 * master's (CM_EV_PROBE) and the receive names its source and tag. */
#include <limits.h>
#include <stdlib.h>

#include "mpi_internal.h"

#define CM_KIND_MESSAGE 0x60000000u
/* MPI_MESSAGE_NO_PROC is the last index: never given to a message. */
#define MESSAGE_INDEX_MAX (CM_HANDLE_INDEX_MAX - 1)

/* Slot i: the bound receive of message handle CM_KIND_MESSAGE | i. */
static struct cm_mpi_request **messages;
static unsigned nmessages, messages_cap;

static int message_new(struct cm_mpi_request *r, MPI_Message *out)
{
	unsigned i;
	for (i = 0; i < nmessages; i++)
		if (!messages[i])
			break;
	if (i == nmessages) {
		if (nmessages > MESSAGE_INDEX_MAX)
			return MPI_ERR_NO_MEM;
		if (nmessages == messages_cap) {
			unsigned cap = messages_cap ? messages_cap * 2 : 16;
			struct cm_mpi_request **n = realloc(messages, cap * sizeof *n);
			if (!n)
				return MPI_ERR_NO_MEM;
			messages = n;
			messages_cap = cap;
		}
		nmessages++;
	}
	messages[i] = r;
	*out = (MPI_Message)(CM_KIND_MESSAGE | i);
	return MPI_SUCCESS;
}

static struct cm_mpi_request *message_get(MPI_Message m)
{
	if (CM_HANDLE_KIND(m) != CM_KIND_MESSAGE || m == MPI_MESSAGE_NO_PROC)
		return NULL;
	unsigned i = CM_HANDLE_INDEX(m);
	return i < nmessages ? messages[i] : NULL;
}

/* Posts the receive that binds the message res describes (a world rank
 * source) on c, into a buffer of its length. */
static int bind(struct cm_mpi_comm *c, const struct cm_probe_result *res, MPI_Message *message)
{
	if (res->bytes > CM_MAX_PAYLOAD)
		return MPI_ERR_INTERN; /* no message is that long */
	/* A count is an int: past 2 GiB - 1 bytes the buffer is counted in
	 * 4-byte units (rounded up; the status keeps the real length). */
	int wide = res->bytes > INT_MAX;
	size_t cap = wide ? (res->bytes + 3) / 4 * 4 : res->bytes;
	void *buf = malloc(cap ? cap : 1);
	struct cm_mpi_request *r = buf ? cm_mpi_req_alloc(c) : NULL;
	if (!r) {
		free(buf);
		return MPI_ERR_NO_MEM;
	}
	int rc = cm_mpi_launch_recv(r, buf, wide ? (int)(cap / 4) : (int)cap,
	                            cm_mpi_type_get(wide ? MPI_INT32_T : MPI_BYTE),
	                            cm_mpi_peer_rank_of(c, res->source), res->tag, c->ctx_pt2pt);
	if (rc) {
		cm_mpi_req_release(r);
		free(buf);
		return rc;
	}
	rc = message_new(r, message);
	if (rc) {
		/* Posted: it must finish in the background, into a buffer nobody
		 * reads any more (left to leak: the transport may still write it). */
		cm_mpi_req_detach(r);
		return rc;
	}
	/* From now on the request owns the buffer; the type to unpack it with
	 * comes with MPI_Mrecv / MPI_Imrecv. */
	r->bounce = buf;
	return rc;
}

static int mprobe(int source, int tag, MPI_Comm comm, int blocking, int *flag, MPI_Message *message,
                  MPI_Status *status, const char *func)
{
	struct cm_mpi_comm *c;
	struct cm_probe_result res;
	int rc = cm_mpi_probe(comm, source, tag, blocking, message != NULL, flag, status, &c, &res,
	                      func);
	if (rc)
		return rc;
	if (source == MPI_PROC_NULL) {
		*message = MPI_MESSAGE_NO_PROC;
		return MPI_SUCCESS;
	}
	if (!res.found) {
		*message = MPI_MESSAGE_NULL;
		return MPI_SUCCESS;
	}
	rc = bind(c, &res, message);
	return rc ? cm_mpi_raise(c, rc, func) : MPI_SUCCESS;
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Mprobe");
	return mprobe(source, tag, comm, 1, NULL, message, status, "MPI_Mprobe");
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Improbe");
	return mprobe(source, tag, comm, 0, flag, message, status, "MPI_Improbe");
}

/* The request that completes the receive of *message into buf, or an
 * error class. The message handle becomes MPI_MESSAGE_NULL. */
static int mrecv_start(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
                       struct cm_mpi_request **out, struct cm_mpi_comm **errc)
{
	*errc = NULL;
	if (!message)
		return MPI_ERR_ARG;
	if (*message == MPI_MESSAGE_NO_PROC) {
		/* What a receive from MPI_PROC_NULL gives: at once, nothing. */
		struct cm_mpi_request *r = cm_mpi_req_alloc(cm_mpi_comm_world());
		if (!r)
			return MPI_ERR_NO_MEM;
		cm_mpi_status_proc_null(&r->status);
		r->state = CM_RQ_COMPLETE;
		*message = MPI_MESSAGE_NULL;
		*out = r;
		return MPI_SUCCESS;
	}
	struct cm_mpi_request *r = message_get(*message);
	if (!r)
		return MPI_ERR_REQUEST; /* MPI has no message error class */
	struct cm_mpi_comm *c;
	const struct cm_mpi_datatype *t;
	*errc = r->comm;
	int rc = cm_mpi_check_recv(r->comm->handle, buf, count, datatype, MPI_ANY_SOURCE,
	                           MPI_ANY_TAG, &c, &t);
	if (rc)
		return rc;
	r->ubuf = buf;
	r->type = t;
	cm_mpi_type_ref(t);
	r->matched = 1;
	r->ucap = (size_t)count * t->size;
	messages[CM_HANDLE_INDEX(*message)] = NULL;
	*message = MPI_MESSAGE_NULL;
	*out = r;
	return MPI_SUCCESS;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status)
{
	CM_MPI_REQUIRE_INIT("MPI_Mrecv");
	struct cm_mpi_request *r;
	struct cm_mpi_comm *c;
	int rc = mrecv_start(buf, count, datatype, message, &r, &c);
	if (rc)
		return cm_mpi_raise(c, rc, "MPI_Mrecv");
	c = r->comm;
	if (cm_mpi_req_wait(r) < 0) {
		cm_mpi_req_detach(r);
		return cm_mpi_raise(c, MPI_ERR_OTHER, "MPI_Mrecv");
	}
	cm_mpi_comm_ref(c); /* kept alive for the error handler */
	int err = cm_mpi_req_finish(r, status);
	rc = err ? cm_mpi_raise(c, err, "MPI_Mrecv") : MPI_SUCCESS;
	cm_mpi_comm_unref(c);
	return rc;
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
               MPI_Request *request)
{
	CM_MPI_REQUIRE_INIT("MPI_Imrecv");
	struct cm_mpi_request *r;
	struct cm_mpi_comm *c;
	int rc = request ? mrecv_start(buf, count, datatype, message, &r, &c) : MPI_ERR_ARG;
	if (rc)
		return cm_mpi_raise(request ? c : NULL, rc, "MPI_Imrecv");
	*request = r->handle;
	return MPI_SUCCESS;
}
