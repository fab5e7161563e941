// fp32 GEMM of the cpu backend: oneDNN's dnnl_sgemm, which picks its kernel
// from the CPU's feature bits (AVX-512, AVX2, ...) rather than its model
// number, and threads over the OpenMP pool every other kernel shares.
// Why oneDNN and not OpenBLAS: docs/runtime.md, measured by bench/gemm_libs.sh.
#include "shardrt/kernels.h"

#include <dnnl.h>
#include <stdio.h>

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
  dnnl_status_t s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n,
                               k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s != dnnl_success)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "gemm: dnnl_sgemm refused %c%c m=%lld n=%lld k=%lld lda=%lld "
                     "ldb=%lld ldc=%lld (dnnl status %d)",
                     trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', (long long)m,
                     (long long)n, (long long)k, (long long)lda, (long long)ldb,
                     (long long)ldc, (int)s);
  return NULL;
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
  snprintf(buf, size, "oneDNN %d.%d.%d sgemm, widest isa %s", v->major, v->minor,
           v->patch, isa_name(dnnl_get_effective_cpu_isa()));
}
