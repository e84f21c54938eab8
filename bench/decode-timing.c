/*
 * How long each llama_decode takes, and how long the decoding thread waits between two of them,
 * in whatever process loads libllama (an lmd runner, llama-server): preloaded, it wraps
 * llama_decode and, when the process exits, appends the medians to the file named by
 * LMD_DECODE_TIMING. It separates the two ways a server can be slower per token: slower decodes
 * (the engine, or CPU taken from it during a decode) or longer gaps (the work between two
 * decodes: sampling, the next batch). docs/benchmarks/history.md, "What a step costs", uses it.
 *
 *   L=node_modules/node-llama-cpp/llama/llama.cpp
 *   cc -shared -fPIC -O2 -I$L/include -I$L/ggml/include -o /tmp/decode-timing.so bench/decode-timing.c
 *   LD_PRELOAD=/tmp/decode-timing.so LMD_DECODE_TIMING=/tmp/timing.txt llama-server ...   (or lmd serve:
 *   the daemon passes LD_PRELOAD on to its runners); stop it or unload the model, then read the file.
 *
 * One line per process: decodes, then median / 10th / 90th percentile of decode and gap in ms. A
 * gap of 5 ms or more is not counted (the server was waiting for requests, not between two steps).
 * Only the first 1,000,000 decodes are kept. Benchmarking only: not built or shipped with lmd.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "llama.h"

#define KEPT 1000000
#define MAX_GAP_MS 5.0

static int (*real_decode)(struct llama_context *, struct llama_batch);
static float decodes[KEPT], gaps[KEPT];
static long n_decodes, n_gaps;
static double last_end;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* libllama is loaded by the addon with dlopen (not in the global scope RTLD_NEXT searches): find it by name. */
static int find_libllama(struct dl_phdr_info *info, size_t size, void *out) {
  (void)size;
  if (!strstr(info->dlpi_name, "libllama")) return 0;
  void *handle = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
  if (handle) *(void **)out = dlsym(handle, "llama_decode");
  return *(void **)out != NULL;
}

int32_t llama_decode(struct llama_context *ctx, struct llama_batch batch) {
  if (!real_decode) {
    void *found = NULL;
    dl_iterate_phdr(find_libllama, &found);
    if (!found) abort();
    real_decode = (int (*)(struct llama_context *, struct llama_batch))found;
  }
  double start = now_ms();
  if (last_end > 0 && start - last_end < MAX_GAP_MS && n_gaps < KEPT) gaps[n_gaps++] = (float)(start - last_end);
  int32_t result = real_decode(ctx, batch);
  last_end = now_ms();
  if (n_decodes < KEPT) decodes[n_decodes++] = (float)(last_end - start);
  return result;
}

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static double at(const float *sorted, long n, double q) { return n ? sorted[(long)(q * (n - 1))] : 0; }

__attribute__((destructor)) static void report(void) {
  const char *path = getenv("LMD_DECODE_TIMING");
  if (!path || n_decodes == 0) return;
  qsort(decodes, n_decodes, sizeof(float), by_value);
  qsort(gaps, n_gaps, sizeof(float), by_value);
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "pid %d: %ld decodes, decode ms median %.3f p10 %.3f p90 %.3f; %ld gaps, gap ms median %.3f p10 %.3f p90 %.3f\n",
          (int)getpid(), n_decodes, at(decodes, n_decodes, 0.5), at(decodes, n_decodes, 0.1), at(decodes, n_decodes, 0.9),
          n_gaps, at(gaps, n_gaps, 0.5), at(gaps, n_gaps, 0.1), at(gaps, n_gaps, 0.9));
  fclose(f);
}
