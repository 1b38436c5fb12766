/* The coroutines of the non-blocking collectives (see mpi_coll_nb.h; the
 * MPI calls are in mpi_coll_nb.c, their start in mpi_progress.c): a
 * coroutine per call, on its own stack, running the blocking collective. The coroutine gives
 * control back wherever the blocking code would wait for a transfer; the
 * progress engine (cm_mpi_progress, the Test and Wait families) resumes it
 * when that transfer is complete, and the request completes when the
 * blocking code returns.
 *
 * Argument errors are found by the blocking code before it waits for
 * anything, so they still come back from the MPI_I... call itself. The
 * arrays of the v and w variants are read while the collective runs: MPI
 * forbids changing them before it completes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "mpi_coll_nb.h"

#if defined(__SANITIZE_ADDRESS__)
#define CM_NBC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CM_NBC_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CM_NBC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CM_NBC_TSAN 1
#endif
#endif
#ifdef CM_NBC_ASAN
#include <dlfcn.h>
#include <sanitizer/asan_interface.h>
#endif
#ifdef CM_NBC_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* Tags of the instances: far above the blocking collectives' ranges (below
 * 0x1000) and below communicator creation's; an instance's range is the
 * blocking one shifted by a multiple of 0x1000, cycling through 0x2ffff
 * slots per communicator (more instances than that pending at once would
 * be needed for two to share tags). */
#define NBC_TAG_BASE 0x10000000
#define NBC_TAG_STRIDE 0x1000
#define NBC_TAG_SLOTS 0x2ffffu

/* A user reduction function or a deep datatype runs on this stack too:
 * generous, and only touched pages cost memory. */
#define NBC_STACK_SIZE ((size_t)1 << 20)
#define NBC_STACK_CACHE 8

struct nbc {
	uint32_t id; /* order of the calls on this rank: names it in the log */
	int tag_bias;
	cm_nbc_run_fn *run;
	_Alignas(max_align_t) unsigned char args[CM_NBC_ARGS_MAX];
	struct cm_mpi_request *req;   /* the program's request */
	struct cm_mpi_request *waits; /* the transfer it waits for; NULL while running */
	int done, rc, yielded;
	ucontext_t ctx;
	void *stack;
#ifdef CM_NBC_ASAN
	void *fake_stack;
#endif
#ifdef CM_NBC_TSAN
	void *fiber;
#endif
	struct nbc *next;
};

int cm_nbc_tag_bias;

static struct nbc *head, *tail; /* pending, oldest first */
static struct nbc *current;     /* running, or NULL: the program's own flow */
static uint32_t next_id;
static ucontext_t main_ctx;
static void *stack_cache[NBC_STACK_CACHE];
static int stack_cached;
#ifdef CM_NBC_ASAN
static void *main_fake_stack;
static const void *main_stack_bottom;
static size_t main_stack_size;
#endif
#ifdef CM_NBC_TSAN
static void *main_fiber;
#endif

static void *stack_get(void)
{
	if (stack_cached > 0)
		return stack_cache[--stack_cached];
	void *s = mmap(NULL, NBC_STACK_SIZE, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (s == MAP_FAILED)
		return NULL;
	/* A guard page: an overflow faults instead of corrupting the heap. */
	mprotect(s, 4096, PROT_NONE);
	return s;
}

static void stack_put(void *s)
{
	if (stack_cached < NBC_STACK_CACHE)
		stack_cache[stack_cached++] = s;
	else
		munmap(s, NBC_STACK_SIZE);
}

int cm_nbc_inside(void)
{
	return current != NULL;
}

int cm_nbc_pending(void)
{
	return head != NULL;
}

uint32_t cm_nbc_next_id(void)
{
	return next_id;
}

void cm_nbc_set_next_id(uint32_t id)
{
	next_id = id;
}

/* ---- switching ---- */

#ifdef CM_NBC_ASAN
/* ASan's swapcontext interceptor prints a warning on a process's first
 * switch (on the program's stderr) and otherwise only clears the shadow of
 * the target stack. The fiber annotations around every switch tell ASan
 * about the stacks, and a stack is unpoisoned when a collective takes it
 * (cm_nbc_launch): libc's swapcontext, past the interceptor, is enough. */
typedef int swap_fn(ucontext_t *, const ucontext_t *);
static swap_fn *real_swap;

static int switch_ctx(ucontext_t *from, const ucontext_t *to)
{
	if (!real_swap) {
		real_swap = (swap_fn *)dlsym(RTLD_NEXT, "swapcontext");
		if (!real_swap)
			real_swap = swapcontext;
	}
	return real_swap(from, to);
}
#else
#define switch_ctx swapcontext
#endif

static void entered(struct nbc *n)
{
#ifdef CM_NBC_ASAN
	__sanitizer_finish_switch_fiber(n->fake_stack, &main_stack_bottom, &main_stack_size);
#else
	(void)n;
#endif
}

static void to_main(struct nbc *n)
{
#ifdef CM_NBC_ASAN
	__sanitizer_start_switch_fiber(n->done ? NULL : &n->fake_stack, main_stack_bottom,
	                               main_stack_size);
#endif
#ifdef CM_NBC_TSAN
	__tsan_switch_to_fiber(main_fiber, 0);
#endif
	switch_ctx(&n->ctx, &main_ctx);
	entered(n);
}

static void entry(void)
{
	struct nbc *n = current;
	entered(n);
	n->rc = n->run(n->args);
	n->done = 1;
	to_main(n); /* never comes back: a done coroutine is not resumed */
	abort();
}

static void finish(struct nbc *n)
{
	struct nbc **link = &head;
	struct nbc *prev = NULL;
	while (*link != n) {
		prev = *link;
		link = &(*link)->next;
	}
	*link = n->next;
	if (tail == n)
		tail = prev;
	struct cm_mpi_request *r = n->req;
	cm_mpi_status_empty(&r->status);
	r->error = n->rc;
	r->state = CM_RQ_COMPLETE;
	stack_put(n->stack);
#ifdef CM_NBC_TSAN
	__tsan_destroy_fiber(n->fiber);
#endif
	free(n);
}

/* Runs n from the program's flow until it waits or ends. */
static void switch_in(struct nbc *n)
{
	current = n;
	cm_nbc_tag_bias = n->tag_bias;
	n->waits = NULL;
#ifdef CM_NBC_ASAN
	__sanitizer_start_switch_fiber(&main_fake_stack, n->stack, NBC_STACK_SIZE);
#endif
#ifdef CM_NBC_TSAN
	if (!main_fiber)
		main_fiber = __tsan_get_current_fiber();
	__tsan_switch_to_fiber(n->fiber, 0);
#endif
	switch_ctx(&main_ctx, &n->ctx);
#ifdef CM_NBC_ASAN
	__sanitizer_finish_switch_fiber(main_fake_stack, NULL, NULL);
#endif
	current = NULL;
	cm_nbc_tag_bias = 0;
	if (n->done)
		finish(n);
}

/* Always gives control back, even when r is complete already: whether it
 * is depends on timing, and each wait must be one logged step for a
 * re-execution to cut the coroutine at the same places. */
int cm_nbc_wait(struct cm_mpi_request *r)
{
	struct nbc *n = current;
	do {
		n->waits = r;
		n->yielded = 1;
		to_main(n);
	} while (!cm_mpi_req_poll(r));
	return 0;
}

/* The log keeps 24 bits of an id: ample, as the oldest pending collective
 * is searched first. */
static struct nbc *find(uint32_t id)
{
	for (struct nbc *n = head; n; n = n->next)
		if (((n->id ^ id) & 0xffffffu) == 0)
			return n;
	return NULL;
}

int cm_nbc_ready(uint32_t *id)
{
	for (struct nbc *n = head; n; n = n->next)
		if (n->waits && cm_mpi_req_poll(n->waits)) {
			*id = n->id;
			return 1;
		}
	return 0;
}

void cm_nbc_resume(uint32_t id)
{
	struct nbc *n = find(id);
	if (n && n->waits)
		switch_in(n);
}

int cm_nbc_force(uint32_t id)
{
	struct nbc *n = find(id);
	if (!n || !n->waits)
		return -2;
	while (!cm_mpi_req_poll(n->waits)) {
		if (cm_mpi.transport.progress(&cm_mpi.transport, -1) < 0)
			return -1;
		cm_mpi_req_reap_detached();
	}
	switch_in(n);
	return 0;
}

/* ---- starting one ---- */

/* getcontext returns twice as far as the compiler knows: kept out of
 * cm_nbc_launch, whose locals it would otherwise count as clobbered (and
 * -Wclobbered fails the sanitizer build). The context never comes back
 * here: makecontext points it at entry on the coroutine's stack. */
static __attribute__((noinline)) void make_ctx(struct nbc *n)
{
	getcontext(&n->ctx);
	n->ctx.uc_stack.ss_sp = n->stack;
	n->ctx.uc_stack.ss_size = NBC_STACK_SIZE;
	n->ctx.uc_link = NULL;
	makecontext(&n->ctx, entry, 0);
}

int cm_nbc_launch(const char *func, struct cm_mpi_comm *c, cm_nbc_run_fn *run, const void *args,
                  size_t len, MPI_Request *request)
{
	struct nbc *n = calloc(1, sizeof *n);
	void *stack = n ? stack_get() : NULL;
	struct cm_mpi_request *r = stack ? cm_mpi_req_alloc(c) : NULL;
	if (!r) {
		if (stack)
			stack_put(stack);
		free(n);
		return cm_mpi_raise(c, MPI_ERR_NO_MEM, func);
	}
	n->id = next_id++;
	n->tag_bias = NBC_TAG_BASE + (int)(c->nbc_seq++ % NBC_TAG_SLOTS) * NBC_TAG_STRIDE;
	n->run = run;
	memcpy(n->args, args, len);
	n->req = r;
	n->stack = stack;
#ifdef CM_NBC_ASAN
	/* Frames of an earlier collective on a cached stack left poison. */
	__asan_unpoison_memory_region(stack, NBC_STACK_SIZE);
#endif
#ifdef CM_NBC_TSAN
	n->fiber = __tsan_create_fiber(0);
#endif
	make_ctx(n);
	if (tail)
		tail->next = n;
	else
		head = n;
	tail = n;
	int yielded;
	switch_in(n); /* up to its first wait: n may be freed on return */
	yielded = r->state != CM_RQ_COMPLETE;
	if (!yielded && r->error) {
		/* Found before anything was waited for: an argument error,
		 * already raised by the blocking code. */
		int rc = r->error;
		cm_mpi_req_release(r);
		*request = MPI_REQUEST_NULL;
		return rc;
	}
	*request = r->handle;
	return MPI_SUCCESS;
}
