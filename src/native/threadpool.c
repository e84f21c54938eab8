/*
 * lmd-threadpool.so: persistent ggml threadpools for the llama.cpp contexts of lmd's runner processes.
 *
 * node-llama-cpp 3.22.1's addon never attaches a threadpool to the contexts it makes, so with its
 * prebuilt binaries (built without OpenMP) every llama_decode creates and joins fresh worker threads
 * (ggml_graph_compute's "disposable threadpool"). On a small VM the kernel often starts such a thread
 * on the vCPU the decoding thread runs on; ggml's spinning barriers then share one vCPU and a token
 * takes several times as long (docs/benchmarks/history.md, "A persistent threadpool"). llama.cpp has the
 * API for the fix (llama_attach_threadpool); the addon does not call it. Until it does, the daemon
 * preloads this library into each runner it forks (LD_PRELOAD, src/runner/client.ts), and it
 * interposes two functions the addon imports from libllama:
 *
 * - llama_synchronize(ctx), which the addon calls after every llama_decode: the first time for a
 *   context, a ggml threadpool of max(n_threads, n_threads_batch) threads (ggml's default
 *   parameters but a shorter poll, POLL below) is attached to it, so its later decodes reuse the
 *   same threads. A runner's contexts share one pool (one_decoding_thread below).
 * - llama_set_n_threads(ctx, n, n_batch), which the addon calls when the runner changes a context's
 *   threads while it serves (src/runner/threads.ts): a context known here moves to a pool of its
 *   new size (none for 1 thread). A pool's idle workers would otherwise poll through every graph
 *   they take no part in (ggml's workers of index ≥ the graph's threads spin until the next one).
 *   The pool it leaves is freed after the context's next decode, not before: ggml's CPU backend
 *   still holds it until then (`stale` below).
 * - llama_free(ctx): frees the context, then its pool once no context uses it.
 *
 * Each calls libllama's own function; nothing else changes. Only pointers and ints cross this
 * boundary, so no llama.cpp header (no struct layout) is needed: ggml's parameters are filled in by
 * ggml_threadpool_params_init into a buffer larger than the struct. Whatever cannot be found leaves
 * the context as it was (a threadpool per decode). A context of 1 thread needs no pool.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct llama_context;
struct ggml_threadpool;

/* struct ggml_threadpool_params is 528 bytes in this llama.cpp (512 CPU mask flags and 5 fields). */
#define PARAMS_BUFFER 4096
/*
 * How long a pool's workers poll for the next graph before they sleep: ggml's default, 50, spins a
 * core for about 200 ms after each decode here (an idle runner burns that after every request);
 * 5 spins about 20 ms, still through the gap between two decodes, and measured as fast.
 */
#define POLL 5
#define DEFAULT_POLL 50
#define MAX_CONTEXTS 64

void llama_synchronize(struct llama_context *ctx);
void llama_free(struct llama_context *ctx);
void llama_set_n_threads(struct llama_context *ctx, int32_t n_threads, int32_t n_threads_batch);

#define MAX_OBJECTS 512

struct objects {
	const char *names[MAX_OBJECTS];
	int count;
};

static int list_object(struct dl_phdr_info *info, size_t size, void *data) {
	struct objects *list = data;
	(void)size;
	if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0' && list->count < MAX_OBJECTS) list->names[list->count++] = info->dlpi_name;
	return 0;
}

/* Marks this library: a second copy preloaded beside it (or any build of it) is never taken for the
 * library whose function it stands in for, which would make the two call each other for ever. */
__attribute__((visibility("default"))) const int lmd_threadpool_library = 1;

/* libllama's (or ggml's) function of that name. The addon loads libllama in a local scope, where
 * dlsym(RTLD_NEXT) does not look, so each loaded object is asked in turn, through its own handle
 * (which searches it and its dependencies only), skipping this library and its copies. The objects
 * are listed first and opened after: dlopen must not run inside dl_iterate_phdr, which holds the
 * loader's lock. */
static void *real(const char *name) {
	struct objects list = {.count = 0};
	dl_iterate_phdr(list_object, &list);
	for (int i = 0; i < list.count; i++) {
		void *handle = dlopen(list.names[i], RTLD_LAZY | RTLD_NOLOAD);
		if (handle == NULL) continue;
		void *f = dlsym(handle, "lmd_threadpool_library") == NULL ? dlsym(handle, name) : NULL;
		dlclose(handle);
		if (f != NULL) return f;
	}
	return NULL;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct llama_context *ctx;
	struct ggml_threadpool *pool;
	/*
	 * The pool the context's CPU backend last computed with, after the context left it: the backend
	 * keeps that pointer until the context's next graph, where ggml pauses the pool it switches
	 * away from (ggml_backend_cpu_set_threadpool). Until that decode the pool must not be freed.
	 */
	struct ggml_threadpool *stale;
} contexts[MAX_CONTEXTS];
static struct {
	struct ggml_threadpool *pool;
	int32_t threads;
	int users;
} pools[MAX_CONTEXTS];

typedef void *(*reg_by_name_fn)(const char *);
typedef void *(*proc_address_fn)(void *, const char *);
typedef void (*params_init_fn)(void *, int);
typedef struct ggml_threadpool *(*pool_new_fn)(void *);
typedef void (*pool_free_fn)(struct ggml_threadpool *);
typedef void (*attach_fn)(struct llama_context *, struct ggml_threadpool *, struct ggml_threadpool *);
typedef void (*detach_fn)(struct llama_context *);
typedef int32_t (*threads_fn)(struct llama_context *);

/* The CPU backend's own functions (it may be a dynamically loaded backend: ask its registry). */
static void *cpu_backend_function(const char *name) {
	reg_by_name_fn reg_by_name = (reg_by_name_fn)real("ggml_backend_reg_by_name");
	proc_address_fn proc_address = (proc_address_fn)real("ggml_backend_reg_get_proc_address");
	if (reg_by_name == NULL || proc_address == NULL) return NULL;
	void *reg = reg_by_name("CPU");
	return reg == NULL ? NULL : proc_address(reg, name);
}

/*
 * Sets the parameters' poll level without their struct: after ggml_threadpool_params_init the CPU
 * mask is all zeros and the fields n_threads, prio and poll follow it as three 4-byte values
 * (threads, 0, 50), a sequence found nowhere else in the struct. Where it is not found (another
 * layout or default), ggml's default stays.
 */
static void set_poll(unsigned char *params, int32_t threads) {
	for (size_t at = 8; at + 4 <= PARAMS_BUFFER; at += 4) {
		int32_t n, prio;
		uint32_t poll;
		memcpy(&n, params + at - 8, 4);
		memcpy(&prio, params + at - 4, 4);
		memcpy(&poll, params + at, 4);
		if (n == threads && prio == 0 && poll == DEFAULT_POLL) {
			poll = POLL;
			memcpy(params + at, &poll, 4);
			return;
		}
	}
}

/* The threads a context decodes with; a pool is made with this many. */
static int32_t context_threads(struct llama_context *ctx) {
	threads_fn n_threads = (threads_fn)real("llama_n_threads");
	threads_fn n_threads_batch = (threads_fn)real("llama_n_threads_batch");
	if (n_threads == NULL || n_threads_batch == NULL) return 0;
	return n_threads(ctx) > n_threads_batch(ctx) ? n_threads(ctx) : n_threads_batch(ctx);
}

static struct ggml_threadpool *new_pool(int32_t threads) {
	params_init_fn params_init = (params_init_fn)real("ggml_threadpool_params_init");
	pool_new_fn pool_new = (pool_new_fn)cpu_backend_function("ggml_threadpool_new");
	if (params_init == NULL || pool_new == NULL) return NULL;
	_Alignas(max_align_t) unsigned char params[PARAMS_BUFFER] = {0};
	params_init(params, threads);
	set_poll(params, threads);
	return pool_new(params);
}

/*
 * A runner decodes on one libuv thread (UV_THREADPOOL_SIZE=1): its contexts (a model's, its
 * draft's, an embedding one) never compute at the same time, so they share one pool. One pool per
 * context would leave the draft's worker polling through the target's decode, on the same cores.
 * With more libuv threads each context gets a pool of its own.
 */
static int one_decoding_thread(void) {
	const char *size = getenv("UV_THREADPOOL_SIZE");
	return size != NULL && strcmp(size, "1") == 0;
}

/* The pool for a context seen for the first time (NULL: none), its users counted. Under the lock. */
static struct ggml_threadpool *pool_for(struct llama_context *ctx) {
	int32_t threads = context_threads(ctx);
	attach_fn attach = (attach_fn)real("llama_attach_threadpool");
	if (threads <= 1 || attach == NULL) return NULL;
	int slot = -1;
	for (int i = 0; i < MAX_CONTEXTS; i++) {
		if (pools[i].pool != NULL && pools[i].threads == threads && one_decoding_thread()) {
			slot = i;
			break;
		}
		if (pools[i].pool == NULL && slot < 0) slot = i;
	}
	if (slot < 0) return NULL;
	if (pools[slot].pool == NULL) {
		pools[slot].pool = new_pool(threads);
		pools[slot].threads = threads;
		if (pools[slot].pool == NULL) return NULL;
	}
	pools[slot].users++;
	attach(ctx, pools[slot].pool, pools[slot].pool);
	return pools[slot].pool;
}

/* One user fewer for `pool` (it is freed by a sweep once no context uses it or may still touch it). Under the lock. */
static void unuse(struct ggml_threadpool *pool) {
	for (int j = 0; pool != NULL && j < MAX_CONTEXTS; j++)
		if (pools[j].pool == pool) pools[j].users--;
}

struct unused {
	struct ggml_threadpool *pools[MAX_CONTEXTS];
	int count;
};

/* Takes out the pools no context uses nor may still touch (the caller frees them, unlocked). Under the lock. */
static void sweep(struct unused *out) {
	out->count = 0;
	for (int j = 0; j < MAX_CONTEXTS; j++) {
		if (pools[j].pool == NULL || pools[j].users > 0) continue;
		int stale = 0;
		for (int i = 0; i < MAX_CONTEXTS && !stale; i++) stale = contexts[i].ctx != NULL && contexts[i].stale == pools[j].pool;
		if (stale) continue;
		out->pools[out->count++] = pools[j].pool;
		pools[j].pool = NULL;
	}
}

static void free_pools(const struct unused *unused) {
	pool_free_fn pool_free = unused->count > 0 ? (pool_free_fn)cpu_backend_function("ggml_threadpool_free") : NULL;
	for (int i = 0; pool_free != NULL && i < unused->count; i++) pool_free(unused->pools[i]);
}

void llama_synchronize(struct llama_context *ctx) {
	static void (*synchronize)(struct llama_context *);
	if (synchronize == NULL) synchronize = (void (*)(struct llama_context *))real("llama_synchronize");
	synchronize(ctx);
	if (ctx == NULL) return;
	struct unused unused = {.count = 0};
	pthread_mutex_lock(&lock);
	int known = 0, slot = -1;
	for (int i = 0; i < MAX_CONTEXTS && !known; i++) {
		if (contexts[i].ctx == ctx) {
			known = 1;
			/* A decode ran: its backend has let go of the pool the context left (if any). */
			if (contexts[i].stale != NULL) {
				contexts[i].stale = NULL;
				sweep(&unused);
			}
		} else if (contexts[i].ctx == NULL && slot < 0) slot = i;
	}
	if (!known && slot >= 0) {
		contexts[slot].ctx = ctx; /* also when it gets no pool: asked once per context */
		contexts[slot].pool = pool_for(ctx);
		contexts[slot].stale = NULL;
	}
	pthread_mutex_unlock(&lock);
	free_pools(&unused);
}

/* The threads of the pool a context uses: 1 without one (it decodes on the calling thread). Under the lock. */
static int32_t pool_threads(struct ggml_threadpool *pool) {
	for (int j = 0; pool != NULL && j < MAX_CONTEXTS; j++)
		if (pools[j].pool == pool) return pools[j].threads;
	return 1;
}

/*
 * Called between two decodes of the context (the runner holds its context lock), never during one:
 * the pool it leaves is detached first, and freed only once no context uses it and the context's
 * backend has computed a graph without it (`stale`).
 */
void llama_set_n_threads(struct llama_context *ctx, int32_t n_threads, int32_t n_threads_batch) {
	static void (*set_threads)(struct llama_context *, int32_t, int32_t);
	if (set_threads == NULL) set_threads = (void (*)(struct llama_context *, int32_t, int32_t))real("llama_set_n_threads");
	set_threads(ctx, n_threads, n_threads_batch);
	if (ctx == NULL) return;
	detach_fn detach = (detach_fn)real("llama_detach_threadpool");
	struct unused unused = {.count = 0};
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_CONTEXTS; i++) {
		if (contexts[i].ctx != ctx) continue;
		if (pool_threads(contexts[i].pool) == context_threads(ctx)) break;
		if (contexts[i].pool != NULL) {
			if (detach == NULL) break; /* cannot leave it: the context keeps its pool, as before */
			detach(ctx);
			/* Without a decode since the last change, the backend still holds the pool before that one. */
			if (contexts[i].stale == NULL) contexts[i].stale = contexts[i].pool;
			unuse(contexts[i].pool);
		}
		contexts[i].pool = pool_for(ctx);
		sweep(&unused);
		break;
	}
	pthread_mutex_unlock(&lock);
	free_pools(&unused);
}

void llama_free(struct llama_context *ctx) {
	static void (*free_context)(struct llama_context *);
	if (free_context == NULL) free_context = (void (*)(struct llama_context *))real("llama_free");
	struct unused unused = {.count = 0};
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_CONTEXTS; i++) {
		if (contexts[i].ctx != ctx) continue;
		unuse(contexts[i].pool);
		contexts[i].ctx = NULL;
		contexts[i].pool = NULL;
		contexts[i].stale = NULL;
	}
	pthread_mutex_unlock(&lock);
	free_context(ctx); /* the context and its backend let go of their pools first */
	pthread_mutex_lock(&lock);
	sweep(&unused);
	pthread_mutex_unlock(&lock);
	free_pools(&unused);
}
