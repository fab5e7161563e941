// GEMMs through cuBLASLt: bf16 operands, fp32 accumulation, bf16 or fp32
// results, the bias fused as the BIAS epilogue. A plan (descriptors and the
// heuristic's best algorithm) is built once per shape and pointer
// alignment and reused: a training step calls the same few shapes every
// layer and every step. The heuristic is told the operands' real alignment
// (arena buffers are 64-byte aligned; cuBLASLt assumes 256 unless told).
#include <string.h>

#include "device.h"

// The largest power of two, at most 256, that divides the address.
static uint32_t alignment(const void *p) {
  uintptr_t a = (uintptr_t)p | 256;
  return (uint32_t)(a & (~a + 1));
}

static srt_status make_plan(srt_cuda_device *d, srt_cuda_gemm_plan *p, bool trans_a,
                            bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                            int64_t ldb, bool d_f32, bool bias, const uint32_t align[3]) {
  cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  SRT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  SRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                  sizeof ta));
  SRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                  sizeof tb));
  if (bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bias_type = CUDA_R_16BF;
    SRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                    &epi, sizeof epi));
    SRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  }
  // Stored shapes: A is [m, k] or, transposed, [k, m]; likewise B.
  SRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, (uint64_t)(trans_a ? k : m),
                                              (uint64_t)(trans_a ? m : k), lda));
  SRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, (uint64_t)(trans_b ? n : k),
                                              (uint64_t)(trans_b ? k : n), ldb));
  SRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, d_f32 ? CUDA_R_32F : CUDA_R_16BF,
                                              (uint64_t)m, (uint64_t)n, m));
  cublasLtMatmulPreference_t pref;
  SRT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = d->lt_workspace_bytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i) // C is D (beta 0)
    st = cublasLtMatmulPreferenceSetAttribute(pref, which[i], &align[i < 3 ? i : 2],
                                              sizeof align[0]);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(d->lt, p->desc, p->a, p->b, p->d, p->d, pref, 1,
                                        &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  SRT_CUBLAS_CHECK(st);
  if (found == 0)
    return SRT_ERROR(SRT_UNAVAILABLE,
                     "cublasLtMatmulAlgoGetHeuristic found no algorithm for m %lld n %lld k "
                     "%lld (trans %d%d, %s output%s)",
                     (long long)m, (long long)n, (long long)k, trans_a, trans_b,
                     d_f32 ? "fp32" : "bf16", bias ? ", bias" : "");
  p->algo = result.algo;
  return NULL;
}

static srt_status find_plan(srt_cuda_device *d, bool trans_a, bool trans_b, int64_t m,
                            int64_t n, int64_t k, int64_t lda, int64_t ldb, bool d_f32,
                            bool bias, const uint32_t align[3], srt_cuda_gemm_plan **out) {
  // Sizes are at most 2^31 (checked by the caller), so int32 keys suffice.
  int32_t key[10] = {trans_a, trans_b, (int32_t)m, (int32_t)n, (int32_t)k, (int32_t)lda,
                     (int32_t)ldb, d_f32 * 2 + bias, (int32_t)(align[0] | align[1] << 9),
                     (int32_t)align[2]};
  for (int i = 0; i < d->num_plans; ++i)
    if (!memcmp(d->plans[i].key, key, sizeof key)) {
      *out = &d->plans[i];
      return NULL;
    }
  srt_cuda_gemm_plan fresh;
  memset(&fresh, 0, sizeof fresh);
  memcpy(fresh.key, key, sizeof key);
  srt_status s = make_plan(d, &fresh, trans_a, trans_b, m, n, k, lda, ldb, d_f32, bias, align);
  if (s) {
    if (fresh.desc)
      cublasLtMatmulDescDestroy(fresh.desc);
    if (fresh.a)
      cublasLtMatrixLayoutDestroy(fresh.a);
    if (fresh.b)
      cublasLtMatrixLayoutDestroy(fresh.b);
    if (fresh.d)
      cublasLtMatrixLayoutDestroy(fresh.d);
    return s;
  }
  if (d->num_plans == SRT_CUDA_GEMM_PLANS) { // full: replace the oldest
    cublasLtMatmulDescDestroy(d->plans[0].desc);
    cublasLtMatrixLayoutDestroy(d->plans[0].a);
    cublasLtMatrixLayoutDestroy(d->plans[0].b);
    cublasLtMatrixLayoutDestroy(d->plans[0].d);
    memmove(&d->plans[0], &d->plans[1], (SRT_CUDA_GEMM_PLANS - 1) * sizeof d->plans[0]);
    --d->num_plans;
  }
  d->plans[d->num_plans] = fresh;
  *out = &d->plans[d->num_plans++];
  return NULL;
}

srt_status srt_cuda_gemm(srt_cuda_device *d, bool trans_a, bool trans_b, int64_t m, int64_t n,
                         int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                         void *out, bool d_f32, const void *bias) {
  const int64_t limit = (int64_t)1 << 31;
  if (m <= 0 || n <= 0 || k <= 0 || m >= limit || n >= limit || k >= limit || lda >= limit ||
      ldb >= limit)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "srt_cuda_gemm: sizes m %lld n %lld k %lld must lie in [1, 2^31)",
                     (long long)m, (long long)n, (long long)k);
  srt_cuda_gemm_plan *p;
  const uint32_t align[3] = {alignment(a), alignment(b), alignment(out)};
  SRT_RETURN_IF_ERROR(
      find_plan(d, trans_a, trans_b, m, n, k, lda, ldb, d_f32, bias != NULL, align, &p));
  if (bias)
    SRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof bias));
  const float one = 1.0f, zero = 0.0f;
  SRT_CUBLAS_CHECK(cublasLtMatmul(d->lt, p->desc, &one, a, p->a, b, p->b, &zero, out, p->d,
                                  out, p->d, &p->algo, d->lt_workspace, d->lt_workspace_bytes,
                                  d->compute));
  return NULL;
}
