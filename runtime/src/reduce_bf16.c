// Reductions of bf16 buffers over MPI (context_internal.h). MPI defines no
// bf16 datatype, so a bf16 buffer travels as MPI_UINT16_T, two bytes an
// element, and two user ops reduce it. The sum adds each pair of operands
// in fp32 and rounds the partial sum to bf16, nearest even: the numerics
// of NCCL's bf16 sum (src/device/reduce_kernel.h: FuncSum<__nv_bfloat16>
// is __hadd on sm_80 and later, __float2bfloat16 of the fp32 sum before),
// every partial sum of the reduction tree rounded, not only the last.
// Rounding the exact fp32 sum of two bf16 values (fp32 has 24 significand
// bits, at least 2 x 8 + 2) to bf16 gives the correctly rounded bf16 sum
// (double rounding is innocuous there: Figueroa, "When is double rounding
// innocuous?", 1995), so this is __hadd's result bit for bit. The max
// compares the values (the bits, sign and magnitude, do not order as
// integers) and is exact.
#include "context_internal.h"

#include "shardrt/bf16_inline.h"

void srt_bf16_sum_into(uint16_t *acc, const uint16_t *x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    acc[i] = srt_bf16_store(srt_bf16_load(x[i]) + srt_bf16_load(acc[i]));
}

void srt_bf16_max_into(uint16_t *acc, const uint16_t *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (srt_bf16_load(x[i]) > srt_bf16_load(acc[i]))
      acc[i] = x[i];
}

// MPI_User_function: inout[i] = bf16(in[i] + inout[i]) for *len elements.
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  srt_bf16_sum_into(inout, in, *len);
}

// MPI_User_function: inout[i] = the larger of in[i] and inout[i].
static void max_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  srt_bf16_max_into(inout, in, *len);
}

srt_status srt_bf16_reductions_create(srt_context *ctx) {
  srt_group *world = &ctx->groups[SRT_GROUP_WORLD];
  // Commutative (a + b and b + a round alike), as MPI_SUM on floats is;
  // like it, associative only up to rounding: MPI's reduction order
  // decides the low bits.
  SRT_MPI(world, MPI_Op_create(sum_bf16, 1, &ctx->bf16_sum));
  SRT_MPI(world, MPI_Op_create(max_bf16, 1, &ctx->bf16_max));
  return NULL;
}

void srt_bf16_reductions_free(srt_context *ctx) {
  if (ctx->bf16_sum != MPI_OP_NULL)
    MPI_Op_free(&ctx->bf16_sum);
  if (ctx->bf16_max != MPI_OP_NULL)
    MPI_Op_free(&ctx->bf16_max);
}
