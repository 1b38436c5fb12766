/* Parsing of the sizes and durations every command line takes. */
#ifndef CHANMEM_UNITS_H
#define CHANMEM_UNITS_H

#include <stdint.h>

/* "4096", "64K", "4MiB", "1G" (K/M/G = 1024-based, optional "iB"/"B").
 * Returns 0, or -1 for anything else (trailing junk, overflow, negative). */
int cm_parse_size(const char *text, uint64_t *out);

/* "250ms", "2s", "1.5s", "3m", "100us"; a bare number is seconds.
 * Returns 0 and nanoseconds in *out_ns, or -1. */
int cm_parse_duration(const char *text, uint64_t *out_ns);

/* Strict decimal integer in [min, max]: digits with an optional leading
 * minus, nothing else (no blanks, no plus sign); returns 0 or -1. */
int cm_parse_long(const char *text, long min, long max, long *out);

#endif
