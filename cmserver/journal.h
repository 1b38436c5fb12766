/* The journal file (cmserver --journal): what lets a CM's state outlive
 * its process. The core hands it every state-changing input (core.h,
 * cm_journal_ops); it appends them to one file, and an engine calls
 * cm_journal_flush before it writes any output to a socket, so nothing a
 * rank can observe depends on an input the file does not hold. A write()
 * that returned is in the page cache, which survives the process: a CM
 * killed at any point leaves a file whose records are whole but for the
 * last one. A CM started on that file first applies its records to its
 * fresh core (cm_journal_recover), then appends to it. */
#ifndef CHANMEM_JOURNAL_H
#define CHANMEM_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

struct cm_core;
struct cm_journal_ops;
struct cm_journal;

/* Opens (creating) path. A file that already holds records must have been
 * written with the same cut_through_min. NULL with a message in err. */
struct cm_journal *cm_journal_open(const char *path, uint32_t cut_through_min, char *err,
                                   size_t errlen);
/* The core's view of it (cm_core_config.journal). */
const struct cm_journal_ops *cm_journal_ops(struct cm_journal *j);
/* Applies the records the file holds to core (a fresh core, before any
 * connection), drops a torn last record, and makes the file ready for
 * appending. 0, or -1 (logged). */
int cm_journal_recover(struct cm_journal *j, struct cm_core *core);
/* Connects to the standby at address standby (mirror.h). Recovery
 * (cm_journal_recover) then sends it what the journal holds, whole, and
 * every write from then on is copied to it. 0, or -1 with a message in
 * err. */
int cm_journal_mirror(struct cm_journal *j, const char *standby, const char *secret,
                      uint32_t world_size, char *err, size_t errlen);
/* Writes whatever was appended and not written yet, and with a standby
 * waits until the standby holds it too. Any thread. */
void cm_journal_flush(struct cm_journal *j);
void cm_journal_close(struct cm_journal *j);
/* A journal is two files: path, the records, and path's data file (the
 * extents of large payloads), named here. 0, or -1 if the name is too
 * long for out. */
int cm_journal_data_path(const char *path, char *out, size_t len);
/* Removes both files (a journal no one will recover from). */
void cm_journal_remove(const char *path);

#endif
