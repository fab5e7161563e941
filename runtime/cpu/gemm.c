// fp32 GEMM of the cpu backend, through oneDNN, which picks its kernels from
// the CPU's feature bits (AVX-512, AVX2, ...) rather than its model number,
// and threads over the OpenMP pool every other kernel shares. Why oneDNN and
// not OpenBLAS: docs/runtime.md, measured by bench/gemm_libs.sh.
//
// Two entry points of oneDNN: its matmul primitive (the brgemm kernels) for
// the step's large products, and dnnl_sgemm for the rest. dnnl_sgemm runs the
// forward's x W^T (NT) shapes of a transformer at 75-85% of its NN rate (on
// a Zen 4: 1024x512x2048 NT 147 GFLOP/s against 212 NN), where the primitive
// gives 190-220 on every layout; but a primitive costs 0.3-3 ms to create,
// so it is kept per shape and thread count (the cache below), and products
// inside a parallel region (attention's and Mamba2's tiles, on one thread each) or below
// kPrimitiveFlops stay on dnnl_sgemm.
#include "shardrt/kernels.h"

#include <dnnl.h>
#include <omp.h>
#include <stdio.h>

// Products of fewer multiply-adds (m n k) stay on dnnl_sgemm: a 128^3 one
// takes ~20 us, where the primitive's per-call setup starts to show.
static const double kPrimitiveFlops = 128.0 * 128.0 * 128.0;

// Distinct products a step keeps primitives for (a transformer layer has
// about ten shapes); the oldest entry is replaced past that.
enum { kCacheEntries = 64 };

// One cached matmul: its shape, layout, beta (0 or 1), threads (oneDNN
// fixes a primitive's thread count when it makes it) and the primitive.
typedef struct matmul_entry {
  bool trans_a, trans_b, accumulate;
  dnnl_data_type_t ab; // A's and B's elements: dnnl_f32, or dnnl_bf16
  dnnl_data_type_t cd; // C's: dnnl_f32, or dnnl_bf16 (A and B bf16, beta 0)
  int threads;
  int64_t m, n, k, lda, ldb, ldc;
  dnnl_primitive_t primitive;
  dnnl_memory_desc_t a, b, c;
} matmul_entry;

// The cache, guarded by the critical section `srt_gemm_matmul` (the engine,
// stream and entries are used one call at a time: only calls outside
// parallel regions come here).
static struct {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  matmul_entry entries[kCacheEntries];
  int used, next; // filled entries; the one to replace next when full
  bool failed;    // the engine could not be made: dnnl_sgemm only
} g_matmul;

// A row-major [rows, cols] operand with row stride ld, or its transpose
// stored [cols, rows].
static dnnl_status_t operand_desc(dnnl_memory_desc_t *d, int64_t rows, int64_t cols,
                                  int64_t ld, bool trans, dnnl_data_type_t type) {
  dnnl_dims_t dims = {rows, cols};
  dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
  return dnnl_memory_desc_init_by_strides(d, 2, dims, type, strides);
}

// Builds entry e's descriptors and primitive from its shape fields.
static dnnl_status_t make_matmul(matmul_entry *e) {
  dnnl_status_t s;
  if ((s = operand_desc(&e->a, e->m, e->k, e->lda, e->trans_a, e->ab)) ||
      (s = operand_desc(&e->b, e->k, e->n, e->ldb, e->trans_b, e->ab)) ||
      (s = operand_desc(&e->c, e->m, e->n, e->ldc, false, e->cd)))
    return s;
  dnnl_matmul_desc_t desc;
  if ((s = dnnl_matmul_desc_init(&desc, &e->a, &e->b, NULL, &e->c)))
    return s;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t post = NULL;
  if ((s = dnnl_primitive_attr_create(&attr)))
    return s;
  if (e->accumulate && // beta 1: C += op(A) op(B), oneDNN's sum post-op
      (!(s = dnnl_post_ops_create(&post)) && !(s = dnnl_post_ops_append_sum(post, 1.0f))))
    s = dnnl_primitive_attr_set_post_ops(attr, post);
  dnnl_primitive_desc_t pd = NULL;
  if (!s)
    s = dnnl_primitive_desc_create(&pd, &desc, attr, g_matmul.engine, NULL);
  if (!s)
    s = dnnl_primitive_create(&e->primitive, pd);
  dnnl_primitive_desc_destroy(pd);
  dnnl_post_ops_destroy(post);
  dnnl_primitive_attr_destroy(attr);
  return s;
}

// The cached primitive of this product, made on first use; NULL when oneDNN
// cannot make one (the caller falls back to dnnl_sgemm).
static matmul_entry *find_matmul(const matmul_entry *key) {
  // The engine, stream and primitives live as long as the process (they stay
  // reachable from g_matmul: no leak).
  if (!g_matmul.engine && !g_matmul.failed) {
    g_matmul.failed = dnnl_engine_create(&g_matmul.engine, dnnl_cpu, 0) != dnnl_success;
    if (!g_matmul.failed && dnnl_stream_create(&g_matmul.stream, g_matmul.engine,
                                               dnnl_stream_default_flags) != dnnl_success) {
      dnnl_engine_destroy(g_matmul.engine);
      g_matmul.engine = NULL;
      g_matmul.failed = true;
    }
  }
  if (g_matmul.failed)
    return NULL;
  for (int i = 0; i < g_matmul.used; i++) {
    matmul_entry *e = &g_matmul.entries[i];
    if (e->trans_a == key->trans_a && e->trans_b == key->trans_b && e->ab == key->ab &&
        e->cd == key->cd &&
        e->accumulate == key->accumulate && e->threads == key->threads && e->m == key->m && e->n == key->n &&
        e->k == key->k && e->lda == key->lda && e->ldb == key->ldb && e->ldc == key->ldc)
      return e;
  }
  matmul_entry made = *key;
  if (make_matmul(&made) != dnnl_success)
    return NULL;
  matmul_entry *slot;
  if (g_matmul.used < kCacheEntries) {
    slot = &g_matmul.entries[g_matmul.used++];
  } else {
    slot = &g_matmul.entries[g_matmul.next];
    g_matmul.next = (g_matmul.next + 1) % kCacheEntries;
    dnnl_primitive_destroy(slot->primitive);
  }
  *slot = made;
  return slot;
}

// Runs a cached primitive on the operands: dnnl_success, or oneDNN's refusal.
static dnnl_status_t run_matmul(const matmul_entry *e, const void *a, const void *b,
                                void *c) {
  dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
  dnnl_status_t s;
  if (!(s = dnnl_memory_create(&ma, &e->a, g_matmul.engine, (void *)a)) &&
      !(s = dnnl_memory_create(&mb, &e->b, g_matmul.engine, (void *)b)) &&
      !(s = dnnl_memory_create(&mc, &e->c, g_matmul.engine, c))) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (!(s = dnnl_primitive_execute(e->primitive, g_matmul.stream, 3, args)))
      s = dnnl_stream_wait(g_matmul.stream);
  }
  dnnl_memory_destroy(ma);
  dnnl_memory_destroy(mb);
  dnnl_memory_destroy(mc);
  return s;
}

// C = op(A) op(B) (+ C when beta is 1) through a cached matmul primitive,
// A and B of type ab, C of type cd. *used is false when this product is not
// one for the primitive (or oneDNN makes none for it): nothing was written
// and dnnl_sgemm is to run.
static dnnl_status_t try_matmul(bool *used, dnnl_data_type_t ab, dnnl_data_type_t cd,
                                bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const void *a, int64_t lda, const void *b,
                                int64_t ldb, float beta, void *c, int64_t ldc) {
  *used = false;
  // omp_get_level, not omp_in_parallel: a team of one thread is no active
  // region, and its tiles must stay on dnnl_sgemm like every other team's.
  if (alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || omp_get_level() > 0 ||
      (double)m * (double)n * (double)k < kPrimitiveFlops)
    return dnnl_success;
  matmul_entry key = {.trans_a = trans_a, .trans_b = trans_b, .accumulate = beta == 1.0f, .ab = ab,
                      .cd = cd,
                      .threads = omp_get_max_threads(), .m = m, .n = n, .k = k,
                      .lda = lda, .ldb = ldb, .ldc = ldc};
  dnnl_status_t s = dnnl_success;
#pragma omp critical(srt_gemm_matmul)
  {
    matmul_entry *e = find_matmul(&key);
    *used = e != NULL;
    if (e)
      s = run_matmul(e, a, b, c);
  }
  return s;
}

srt_status srt_cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, float alpha, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float beta, float *c,
                        int64_t ldc) {
  if (m < 0 || n < 0 || k < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "gemm: sizes m=%lld n=%lld k=%lld must be >= 0",
                     (long long)m, (long long)n, (long long)k);
  if (m == 0 || n == 0)
    return NULL;
  if (k == 0) { // an empty sum: C = beta C (beta 0 ignores C, NaN included)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return NULL;
  }
  srt_cpu_fix_threads(); // oneDNN's parts assume the whole team: threads.c
  bool primitive;
  dnnl_status_t s =
      try_matmul(&primitive, dnnl_f32, dnnl_f32, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                 beta, c, ldc);
  if (!primitive)
    s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                   beta, c, ldc);
  if (s != dnnl_success)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "gemm: oneDNN's %s refused %c%c m=%lld n=%lld k=%lld lda=%lld "
                     "ldb=%lld ldc=%lld (dnnl status %d)",
                     primitive ? "matmul" : "dnnl_sgemm", trans_a ? 'T' : 'N',
                     trans_b ? 'T' : 'N', (long long)m, (long long)n, (long long)k,
                     (long long)lda, (long long)ldb, (long long)ldc, (int)s);
  return NULL;
}

// The bf16 matmul with C of type cd (srt_cpu_gemm_bf16 and _bf16_out).
static srt_status gemm_bf16(bool *used, dnnl_data_type_t cd, bool trans_a, bool trans_b,
                            int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float beta, void *c, int64_t ldc) {
  *used = false;
  if (m <= 0 || n <= 0 || k <= 0)
    return NULL;
  srt_cpu_fix_threads(); // as srt_cpu_gemm
  dnnl_status_t s = try_matmul(used, dnnl_bf16, cd, trans_a, trans_b, m, n, k, 1.0f, a, lda, b,
                               ldb, beta, c, ldc);
  if (s != dnnl_success)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "gemm: oneDNN's bf16 matmul refused %c%c m=%lld n=%lld k=%lld lda=%lld "
                     "ldb=%lld ldc=%lld (dnnl status %d)",
                     trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', (long long)m, (long long)n,
                     (long long)k, (long long)lda, (long long)ldb, (long long)ldc, (int)s);
  return NULL;
}

srt_status srt_cpu_gemm_bf16(bool *used, bool trans_a, bool trans_b, int64_t m, int64_t n,
                             int64_t k, const uint16_t *a, int64_t lda, const uint16_t *b,
                             int64_t ldb, float beta, float *c, int64_t ldc) {
  return gemm_bf16(used, dnnl_f32, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

srt_status srt_cpu_gemm_bf16_out(bool *used, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const uint16_t *a, int64_t lda, const uint16_t *b,
                                 int64_t ldb, uint16_t *c, int64_t ldc) {
  return gemm_bf16(used, dnnl_bf16, trans_a, trans_b, m, n, k, a, lda, b, ldb, 0.0f, c, ldc);
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
  case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
  case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core: return "avx512_core";
  case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
  case dnnl_cpu_isa_avx2: return "avx2";
  case dnnl_cpu_isa_avx: return "avx";
  case dnnl_cpu_isa_sse41: return "sse41";
  default: return "generic";
  }
}

void srt_cpu_gemm_library(char *buf, size_t size) {
  const dnnl_version_t *v = dnnl_version();
  snprintf(buf, size, "oneDNN %d.%d.%d matmul and sgemm, widest isa %s", v->major, v->minor,
           v->patch, isa_name(dnnl_get_effective_cpu_isa()));
}
