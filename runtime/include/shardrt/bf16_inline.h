// bf16 <-> fp32 conversions inline, for loops that must vectorise (the
// cpu backend's bf16 kernels, the bf16 reductions of the collectives):
// the same results as convert.h's srt_bf16_to_f32 / srt_f32_to_bf16.
#ifndef SHARDRT_BF16_INLINE_H
#define SHARDRT_BF16_INLINE_H

#include <stdint.h>
#include <string.h>

/// The fp32 value of the bf16 bits h (exact: bf16 is fp32's top half).
static inline float srt_bf16_load(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/// f rounded to bf16 bits, to nearest with ties to even (the cuda kernels'
/// __float2bfloat16); a NaN stays a NaN, quiet, with its sign and top
/// mantissa bits. Branch-free, so loops calling it vectorise.
static inline uint16_t srt_bf16_store(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  // NaN (exponent all ones, mantissa non-zero): its sign and top bits, quiet.
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

#endif // SHARDRT_BF16_INLINE_H
