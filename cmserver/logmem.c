/* Payload memory of the log: a charge for every buffer, and reuse of large
 * blocks (see logmem.h).
 *
 * Why reuse: copying into never-touched pages runs at 0.5-1.5 GB/s on the
 * project's machines (a page fault per 4 KiB), into memory already mapped
 * at tens of GB/s. A log that keeps everything grows forever and pays that
 * fault on every byte; a bounded log that spills reaches a steady state in
 * which every payload can land in a block a spilled or collected one gave
 * back. Blocks of 32 KiB and more are sized in 32 KiB steps and kept on a
 * free list per size; a 4 MiB NetPIPE message (plus its header) always
 * comes back to the same list. Blocks of 2 MiB and more are 2 MiB-aligned
 * and advised MADV_HUGEPAGE: with transparent huge pages in "madvise" mode
 * a first touch faults 2 MiB at once instead of 512 times.
 *
 * The lock below is the allocator's own leaf lock, like malloc's: it guards
 * the free lists only, and nothing is called while it is held. */
#include "config.h"

#include "logmem.h"

#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#define STEP_SHIFT 15 /* 32 KiB */
#define STEP ((size_t)1 << STEP_SHIFT)
#define NCLASSES 2048 /* blocks up to 64 MiB are kept for reuse */
#define HUGE_PAGE ((size_t)2 << 20)

struct block {
	struct block *next;
};

struct cm_logmem {
	uint64_t limit;
	uint64_t live;                           /* atomic */
	uint64_t peak_live, reused, fresh, held; /* atomic */
	uint64_t read_back;                      /* atomic: bytes of outstanding read-backs */
	pthread_mutex_t mu;
	uint64_t cached; /* under mu (read atomically for stats) */
	struct block *free_list[NCLASSES];
	unsigned top; /* no class at or above it has free blocks (under mu) */
};

struct cm_logmem *cm_logmem_new(uint64_t limit)
{
	struct cm_logmem *m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->limit = limit;
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

static void unmap_block(void *p, size_t size)
{
	munmap(p, size);
}

void cm_logmem_free(struct cm_logmem *m)
{
	if (m == NULL)
		return;
	for (unsigned c = 0; c < NCLASSES; c++)
		while (m->free_list[c]) {
			struct block *b = m->free_list[c];
			m->free_list[c] = b->next;
			unmap_block(b, (size_t)c << STEP_SHIFT);
		}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

/* A fresh mapping of size bytes, 2 MiB-aligned when that large. */
static void *map_block(size_t size)
{
	if (size < HUGE_PAGE) {
		void *p =
		    mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	size_t span = size + HUGE_PAGE;
	uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uint8_t *start = (uint8_t *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	if (start > p)
		munmap(p, (size_t)(start - p));
	size_t tail = (size_t)(p + span - (start + size));
	if (tail)
		munmap(start + size, tail);
#ifdef MADV_HUGEPAGE
	madvise(start, size, MADV_HUGEPAGE); /* advice: refused on some kernels, harmless */
#endif
	return start;
}

/* Whether `charge` more bytes may come in for a sender when live are in
 * use (logmem.h, cm_logmem_alloc_admitted). */
static bool admissible(const struct cm_logmem *m, uint64_t live, uint64_t charge)
{
	return live <= m->limit / 4 || (live <= m->limit && charge <= m->limit - live);
}

/* Charges size bytes; with admit, only when the rule allows it, decided and
 * charged in one atomic step, so that engine threads admitting payloads at
 * the same instant cannot pass the bound together. */
static bool charge(struct cm_logmem *m, size_t size, bool admit)
{
	uint64_t live = __atomic_load_n(&m->live, __ATOMIC_RELAXED);
	do {
		if (admit && !admissible(m, live, size)) {
			__atomic_add_fetch(&m->held, 1, __ATOMIC_RELAXED);
			return false;
		}
	} while (!__atomic_compare_exchange_n(&m->live, &live, live + size, true, __ATOMIC_RELAXED,
	                                      __ATOMIC_RELAXED));
	live += size;
	uint64_t peak = __atomic_load_n(&m->peak_live, __ATOMIC_RELAXED);
	while (live > peak && !__atomic_compare_exchange_n(&m->peak_live, &peak, live, true,
	                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return true;
}

static void uncharge(struct cm_logmem *m, size_t size)
{
	__atomic_sub_fetch(&m->live, size, __ATOMIC_RELAXED);
}

/* Gives kept blocks back to the system until live + cached fits the bound
 * (or nothing is kept). Under mu; returns what to unmap through *out (a
 * list threaded through the blocks, sizes by class). */
static void evict_locked(struct cm_logmem *m, struct block **out, unsigned *classes, unsigned *n,
                         unsigned max)
{
	uint64_t live = __atomic_load_n(&m->live, __ATOMIC_RELAXED);
	while (m->cached > 0 && live + m->cached > m->limit && *n < max) {
		while (m->top > 0 && m->free_list[m->top - 1] == NULL)
			m->top--;
		if (m->top == 0)
			break;
		unsigned c = m->top - 1;
		struct block *b = m->free_list[c];
		m->free_list[c] = b->next;
		m->cached -= (uint64_t)c << STEP_SHIFT;
		out[*n] = b;
		classes[*n] = c;
		(*n)++;
	}
}

/* The charge comes first: eviction then sees the new block's bytes among
 * the live ones. */
static void *alloc(struct cm_logmem *m, size_t size, size_t *got, bool admit, bool *held)
{
	*held = false;
	if (m == NULL) {
		*got = size;
		return malloc(size ? size : 1);
	}
	size_t rounded = size < STEP ? size : (size + STEP - 1) & ~(STEP - 1);
	if (!charge(m, rounded, admit)) {
		*held = true;
		return NULL;
	}
	*got = rounded;
	if (size < STEP) {
		void *p = malloc(size ? size : 1);
		if (p == NULL)
			uncharge(m, rounded);
		return p;
	}
	unsigned c = (unsigned)(rounded >> STEP_SHIFT);
	void *p = NULL;
	struct block *evicted[8];
	unsigned classes[8], nevicted = 0;
	if (c < NCLASSES) {
		pthread_mutex_lock(&m->mu);
		if (m->free_list[c]) {
			struct block *b = m->free_list[c];
			m->free_list[c] = b->next;
			m->cached -= rounded;
			p = b;
		} else {
			evict_locked(m, evicted, classes, &nevicted, 8);
		}
		pthread_mutex_unlock(&m->mu);
	}
	for (unsigned i = 0; i < nevicted; i++)
		unmap_block(evicted[i], (size_t)classes[i] << STEP_SHIFT);
	if (p) {
		__atomic_add_fetch(&m->reused, 1, __ATOMIC_RELAXED);
		return p;
	}
	p = map_block(rounded);
	if (p == NULL) {
		uncharge(m, rounded);
		return NULL;
	}
	__atomic_add_fetch(&m->fresh, 1, __ATOMIC_RELAXED);
	return p;
}

void *cm_logmem_alloc(struct cm_logmem *m, size_t size, size_t *got)
{
	bool held;
	return alloc(m, size, got, false, &held);
}

void *cm_logmem_alloc_admitted(struct cm_logmem *m, size_t size, size_t *got, bool *held)
{
	return alloc(m, size, got, true, held);
}

void cm_logmem_release(struct cm_logmem *m, void *p, size_t got)
{
	if (p == NULL)
		return;
	if (m == NULL || got < STEP) {
		free(p);
		if (m)
			__atomic_sub_fetch(&m->live, got, __ATOMIC_RELAXED);
		return;
	}
	unsigned c = (unsigned)(got >> STEP_SHIFT);
	uint64_t live = __atomic_sub_fetch(&m->live, got, __ATOMIC_RELAXED);
	bool keep = false;
	if (c < NCLASSES) {
		pthread_mutex_lock(&m->mu);
		if (live + m->cached + got <= m->limit) {
			struct block *b = p;
			b->next = m->free_list[c];
			m->free_list[c] = b;
			m->cached += got;
			if (c + 1 > m->top)
				m->top = c + 1;
			keep = true;
		}
		pthread_mutex_unlock(&m->mu);
	}
	if (!keep)
		unmap_block(p, got);
}

void cm_logmem_read_back_start(struct cm_logmem *m, size_t got)
{
	if (m)
		__atomic_add_fetch(&m->read_back, got, __ATOMIC_RELAXED);
}

void cm_logmem_read_back_done(struct cm_logmem *m, size_t got)
{
	if (m)
		__atomic_sub_fetch(&m->read_back, got, __ATOMIC_RELAXED);
}

bool cm_logmem_admit_read_back(struct cm_logmem *m)
{
	if (m == NULL)
		return true;
	return __atomic_load_n(&m->live, __ATOMIC_RELAXED) <= m->limit / 2 ||
	       __atomic_load_n(&m->read_back, __ATOMIC_RELAXED) == 0;
}

bool cm_logmem_over(const struct cm_logmem *m, unsigned per256)
{
	if (m == NULL || m->limit == UINT64_MAX)
		return false;
	uint64_t live = __atomic_load_n(&m->live, __ATOMIC_RELAXED);
	return live > m->limit / 256 * per256;
}

void cm_logmem_stats(struct cm_logmem *m, struct cm_logmem_stats *out)
{
	out->limit = m->limit;
	out->live = __atomic_load_n(&m->live, __ATOMIC_RELAXED);
	out->peak_live = __atomic_load_n(&m->peak_live, __ATOMIC_RELAXED);
	out->reused = __atomic_load_n(&m->reused, __ATOMIC_RELAXED);
	out->fresh = __atomic_load_n(&m->fresh, __ATOMIC_RELAXED);
	out->held = __atomic_load_n(&m->held, __ATOMIC_RELAXED);
	pthread_mutex_lock(&m->mu);
	out->cached = m->cached;
	pthread_mutex_unlock(&m->mu);
}

void cm_logmem_log_summary(struct cm_logmem *m)
{
	struct cm_logmem_stats st;
	cm_logmem_stats(m, &st);
	cm_info("log memory: bound %llu bytes, peak %llu in use, %llu blocks reused, %llu mapped, "
	        "senders held back %llu times",
	        (unsigned long long)st.limit, (unsigned long long)st.peak_live,
	        (unsigned long long)st.reused, (unsigned long long)st.fresh,
	        (unsigned long long)st.held);
}
