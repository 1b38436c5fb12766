/* Socket I/O every engine does the same way. */
#include "config.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core.h"
#include "engine.h"
#include "journal.h"

#define WRITE_IOV 64 /* iovecs per sendmsg: up to 32 frames */

int cm_listeners_close(const struct cm_listeners *ls, int status)
{
	for (unsigned k = 0; k < ls->n; k++)
		close(ls->fds[k]);
	return status;
}

bool eng_log_due(struct eng_log_limit *l, double now, unsigned long *repeats)
{
	if (l->last != 0 && now - l->last < ENG_LOG_EVERY) {
		l->quiet++;
		return false;
	}
	*repeats = l->quiet;
	l->quiet = 0;
	l->last = now;
	return true;
}

enum eng_send_result eng_send_output(struct cm_session *s, int fd, int *err)
{
	for (;;) {
		struct iovec iov[WRITE_IOV];
		int n = cm_session_out_iov(s, iov, WRITE_IOV);
		if (n == 0)
			return ENG_SEND_DRAINED;
		size_t want = 0;
		for (int i = 0; i < n; i++)
			want += iov[i].iov_len;
		/* Nothing leaves before the inputs it depends on are in the
		 * journal: what these iovecs hold was journaled before it was
		 * queued (or, payload bytes, before the watermark showed it). */
		void *journal = cm_session_journal(s);
		if (journal)
			cm_journal_flush(journal);
		struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return ENG_SEND_BLOCKED;
			*err = errno;
			return ENG_SEND_FAILED;
		}
		cm_session_out_consumed(s, (size_t)w);
		/* The kernel took what it could: the socket is full. */
		if ((size_t)w < want)
			return ENG_SEND_BLOCKED;
	}
}
