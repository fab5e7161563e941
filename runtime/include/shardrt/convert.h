// Conversions between the 16-bit float formats of checkpoints (bfloat16,
// IEEE binary16) and float32. Widening is exact; narrowing rounds to
// nearest, ties to even.
#ifndef SHARDRT_CONVERT_H
#define SHARDRT_CONVERT_H

#include <stdint.h>

#include "shardrt/status.h"
#include "shardrt/types.h"

/// bfloat16 bits -> float32: the bits shifted left by 16 (exact; signs,
/// infinities and NaN payloads kept).
float srt_bf16_to_f32(uint16_t bits);

/// IEEE binary16 bits -> float32, exact for every input: normals,
/// subnormals (mantissa x 2^-24), signed zeros, infinities, NaNs (quiet,
/// payload shifted into the top of the float32 mantissa).
float srt_f16_to_f32(uint16_t bits);

/// float32 -> bfloat16 bits, rounding to nearest even; NaN stays a (quiet)
/// NaN with its sign; overflow rounds to infinity like the hardware does.
uint16_t srt_f32_to_bf16(float x);

/// float32 -> IEEE binary16 bits, rounding to nearest even (as the
/// hardware's vcvtps2ph and torch's .half()): subnormal results below
/// 2^-14, overflow (|x| >= 65520) to infinity, NaN to a quiet NaN with its
/// sign and the top of its payload.
uint16_t srt_f32_to_f16(float x);

/// Converts `n` float32 elements at `src` to `dtype` at `dst` (which need
/// not be aligned): F32 copied, BF16 and F16 rounded to nearest even.
/// Errors: SRT_INVALID_ARGUMENT for another dtype.
srt_status srt_convert_from_f32(const float *src, srt_dtype dtype, int64_t n, void *dst);

/// Converts `n` elements of `dtype` at `src` to float32 at `dst`. `src`
/// need not be aligned (bytes are read with memcpy: safetensors data may
/// start at any offset). F32 is copied, F16/BF16 widened exactly, F64
/// rounded to nearest. Errors: SRT_INVALID_ARGUMENT for another dtype.
srt_status srt_convert_to_f32(const void *src, srt_dtype dtype, int64_t n,
                              float *dst);

#endif // SHARDRT_CONVERT_H
