// Helpers shared by the srt_op_* tests: a context on a dp x 2 mesh (tp = 2,
// dp = world / 2, or tp = 1 on one rank), an arena with a bump allocator
// handing out byte offsets, and deterministic "global" data every rank can
// regenerate.
#ifndef SHARD_TEST_RUNTIME_OPS_TEST_UTIL_H
#define SHARD_TEST_RUNTIME_OPS_TEST_UTIL_H

#include "runtime_test_util.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>

#include "shardrt/collectives.h"
#include "shardrt/context.h"
#include "shardrt/cpu.h"
#include "shardrt/ops.h"

static srt_context *g_ctx;
static uint8_t *g_arena;
static int64_t g_used;
enum { TEST_ARENA_BYTES = 1 << 24 };

static int ops_setup(void **state) {
  (void)state;
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  srt_context_options o = srt_context_default_options();
  o.tp = world >= 2 ? 2 : 1;
  o.arena_bytes = TEST_ARENA_BYTES;
  srt_status s = srt_context_create(&o, &g_ctx);
  if (s) {
    char buf[512];
    fprintf(stderr, "%s\n", srt_status_format(s, buf, sizeof buf));
    srt_status_free(s);
    return -1;
  }
  g_arena = srt_context_arena(g_ctx)->base;
  return 0;
}

static int ops_teardown(void **state) {
  (void)state;
  srt_status s = srt_context_destroy(g_ctx);
  srt_status_free(s);
  return s ? -1 : 0;
}

/// The exec of the test context.
static inline srt_exec test_exec(void) {
  return (srt_exec){.ctx = g_ctx, .arena = g_arena, .backend = &srt_cpu_backend};
}

/// Forgets every arena buffer (call at the start of each test).
static inline void arena_reset(void) { g_used = 0; }

/// A 64-byte aligned buffer of `bytes` in the arena: its offset.
static inline int64_t arena_alloc(int64_t bytes) {
  int64_t off = g_used;
  g_used += (bytes + 63) / 64 * 64;
  assert_true(g_used <= TEST_ARENA_BYTES);
  return off;
}

static inline float *F(int64_t off) { return (float *)(void *)(g_arena + off); }
static inline int64_t *I(int64_t off) { return (int64_t *)(void *)(g_arena + off); }

/// n floats in the arena filled with value(id, i) in [-1, 1).
static inline float test_value(uint64_t id, int64_t i) {
  uint64_t s = (id << 32) ^ (uint64_t)i;
  test_rng_next(&s);
  return (float)(2.0 * test_rng_uniform(&s) - 1.0);
}

static inline int64_t arena_floats(uint64_t id, int64_t n) {
  int64_t off = arena_alloc(n * 4);
  for (int64_t i = 0; i < n; ++i)
    F(off)[i] = test_value(id, i);
  return off;
}

/// Fills n floats at off with a value no op should leave behind.
static inline void poison(int64_t off, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    F(off)[i] = 12345.0f;
}

static inline int tp_index(void) {
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  return c[SRT_MESH_TP];
}
static inline int tp_size(void) { return srt_context_mesh(g_ctx)->shape[SRT_MESH_TP]; }

/// |a - b| <= tol * max(1, |b|) elementwise, failing with the first index.
static inline void assert_close(const float *a, const float *b, int64_t n, double tol,
                                const char *what) {
  for (int64_t i = 0; i < n; ++i) {
    double d = fabs((double)a[i] - (double)b[i]), s = fabs((double)b[i]);
    if (!(d <= tol * (s > 1 ? s : 1)))
      fail_msg("%s: element %lld: %.9g vs %.9g", what, (long long)i, (double)a[i],
               (double)b[i]);
  }
}

#endif // SHARD_TEST_RUNTIME_OPS_TEST_UTIL_H
