/* A channel memory's journal copied to its standby on another host
 * (cmserver --mirror ADDR, the standby being cmserver --standby at ADDR).
 *
 * Every byte the journal writes to its two files is sent, in the order it
 * is written, as a MIRROR frame saying which file and where; the standby
 * writes it to its own copy and answers MIRROR_ACK with the bytes written
 * so far. cm_mirror_wait returns once the standby holds everything sent,
 * so an output the journal flushed for depends on nothing the standby's
 * copy lacks: when this CM's host dies, the standby takes over from a log
 * that is whole.
 *
 * A mirror that breaks stops this CM (the process exits): the standby
 * takes over when the stream ends, so a CM that went on alone could
 * answer ranks the standby does not know of. */
#ifndef CHANMEM_MIRROR_H
#define CHANMEM_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct cm_mirror;

/* Connects to the standby at addr_text, says HELLO (kind CM_PEER_MIRROR)
 * with the job secret and waits for its HELLO_ACK. NULL with a message in
 * err. */
struct cm_mirror *cm_mirror_connect(const char *addr_text, const char *secret, uint32_t world_size,
                                    char *err, size_t errlen);
/* Sends n iovecs as one MIRROR frame for offset in the records file, or the
 * data file when data is set. Blocks while the socket is full. Returns the
 * bytes sent (the iovecs' total). */
size_t cm_mirror_send(struct cm_mirror *m, bool data, uint64_t offset, const struct iovec *iov,
                      int n);
/* Returns once the standby acknowledged every byte sent so far. Cheap when
 * it already has. */
void cm_mirror_wait(struct cm_mirror *m);
/* Tells the standby its copy is whole: everything the journal held has
 * been sent (a journal that already held records is copied first), so from
 * here on the standby may take over. Returns once it acknowledged. */
void cm_mirror_whole(struct cm_mirror *m);
/* Tells the standby this CM ended cleanly, and closes. */
void cm_mirror_end(struct cm_mirror *m);
/* Closes without a word: the standby, whose copy is not whole, gives up. */
void cm_mirror_abandon(struct cm_mirror *m);

#endif
