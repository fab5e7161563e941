// bfloat16 / binary16 <-> float32 by bit manipulation (IEEE 754 layouts).
#include "shardrt/convert.h"

#include "shardrt/bf16_inline.h"

#include <string.h>

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

float srt_bf16_to_f32(uint16_t bits) { return srt_bf16_load(bits); }

float srt_f16_to_f32(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) // inf or NaN: all-ones exponent, mantissa moved up
    return from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) // normal: rebias 15 -> 127
    return from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0)
    return from_bits(sign);
  // Subnormal: mant x 2^-24. Normalise: shift until the implicit bit
  // (bit 10) is set; each shift lowers the exponent by one.
  uint32_t e = 113; // exponent of 2^-14 in float32, before normalising
  while (!(mant & 0x400u)) {
    mant <<= 1;
    --e;
  }
  return from_bits(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t srt_f32_to_bf16(float x) { return srt_bf16_store(x); }

uint16_t srt_f32_to_f16(float x) {
  uint32_t u = to_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN: quiet, the payload's top bits kept
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // 65520 and up (and infinity): rounds to infinity
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { // a normal half (>= 2^-14): rebias 127 -> 15, round
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
  }
  uint32_t e = a >> 23;
  if (e < 102) // below 2^-25: rounds to zero
    return sign;
  // A subnormal half: the significand in units of 2^-24, rounded to even
  // (a carry into 0x400 is the smallest normal, encoded alike).
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  int shift = 126 - (int)e;
  uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u)))
    ++q;
  return (uint16_t)(sign | q);
}

srt_status srt_convert_from_f32(const float *src, srt_dtype dtype, int64_t n, void *dst) {
  unsigned char *d = dst;
  switch (dtype) {
  case SRT_F32:
    memcpy(dst, src, (size_t)n * sizeof(float));
    return NULL;
  case SRT_BF16:
  case SRT_F16:
    for (int64_t i = 0; i < n; ++i) {
      uint16_t b = dtype == SRT_BF16 ? srt_f32_to_bf16(src[i]) : srt_f32_to_f16(src[i]);
      memcpy(d + 2 * i, &b, 2);
    }
    return NULL;
  default:
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "convert: cannot convert F32 to %s (F32, F16, BF16 can)",
                     srt_dtype_name(dtype));
  }
}

srt_status srt_convert_to_f32(const void *src, srt_dtype dtype, int64_t n,
                              float *dst) {
  const unsigned char *s = src;
  switch (dtype) {
  case SRT_F32:
    memcpy(dst, src, (size_t)n * sizeof(float));
    return NULL;
  case SRT_BF16:
  case SRT_F16:
    for (int64_t i = 0; i < n; ++i) {
      uint16_t b;
      memcpy(&b, s + 2 * i, 2);
      dst[i] = dtype == SRT_BF16 ? srt_bf16_to_f32(b) : srt_f16_to_f32(b);
    }
    return NULL;
  case SRT_F64:
    for (int64_t i = 0; i < n; ++i) {
      double d;
      memcpy(&d, s + 8 * i, 8);
      dst[i] = (float)d;
    }
    return NULL;
  default:
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "convert: cannot convert %s to F32 (F32, F16, BF16, F64 can)",
                     srt_dtype_name(dtype));
  }
}
