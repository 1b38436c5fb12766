/* Diagnostics to stderr, prefixed with the program name. */
#ifndef CHANMEM_LOG_H
#define CHANMEM_LOG_H

void cm_log_init(const char *progname, int verbosity);
int cm_log_verbosity(void);
void cm_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Always printed, not an error: the end of a condition an error reported. */
void cm_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cm_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cm_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* cm_err then exit(status). */
void cm_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

#endif
