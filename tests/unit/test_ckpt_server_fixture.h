/* The fixture of the live ckptserver tests (test_ckpt_server.c,
 * test_ckpt_server_refusals.c): each test gets a fresh directory under a
 * temporary root and a ckptserver ($CKPTSERVER) serving it on 127.0.0.1,
 * killed by pid afterwards. Every wait is bounded. */
#ifndef CHANMEM_TEST_CKPT_SERVER_FIXTURE_H
#define CHANMEM_TEST_CKPT_SERVER_FIXTURE_H

#include "ckpt_client.h"

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SECRET "0123456789abcdef0123456789abcdef"
#define IO_MS 20000 /* generous: the machine is shared */
#define JOB "testjob"

/* This test's directory, and the address of the server serving it. */
extern char server_dir[96];
extern char server_addr[64];

/* Waits up to ms for pid; returns its status or -1. */
int wait_bounded(pid_t pid, int ms);
/* Runs ckptserver with args (NULL-terminated). Returns its pid once it
 * wrote its address on --ready-fd, or -1 with *status set if it exited. */
pid_t spawn(const char *secret, const char *const extra[], char *addr, int *status);
/* Runs ckptserver with args (NULL-terminated) to its exit, its stdout and
 * stderr into out (NUL-terminated, at most cap - 1 bytes). The exit status,
 * or -1 if it was killed or did not exit in time. */
int run_ckptserver(const char *const args[], char *out, size_t cap);
/* The fixture's server (--dir server_dir plus extra): started, stopped
 * with SIGTERM expecting a clean exit 0, or SIGKILLed. */
void start_server(const char *const extra[]);
void stop_server(void);
void kill_server(void);

/* Deterministic contents that differ per (seed, offset). */
uint8_t *make_image(size_t size, uint32_t seed);
struct ckpt_client *connect_ok(void);
void upload_ok(struct ckpt_client *c, uint32_t rank, uint64_t number, const void *data,
               size_t size);
void expect_latest(struct ckpt_client *c, uint32_t rank, uint64_t number, const void *data,
                   size_t size);
/* Files in server_dir whose names start with prefix (now, or once there
 * are want of them, waiting up to ms). */
int count_files(const char *prefix);
int wait_for_files(const char *prefix, int want, int ms);

/* Runs the tests add_tests adds, each with the fixture; the exit status. */
int run_live_tests(const char *suite_name, void (*add_tests)(TCase *tc));

#endif
