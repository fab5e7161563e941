// Rotary position embeddings: the (cos, sin) tuple with default or Llama-3
// frequency scaling, and its rotate-half application to q/k heads.
// The cpu backend's entry points (srt_cpu_op_rotary_embedding, apply_rotary and
// its gradient) close the file.
#include "shardrt/kernels.h"

#include <math.h>

#include "ops_internal.h"
#include "vmath.h"

static const double kPi = 3.14159265358979323846;

static srt_status check_config(const srt_rope_config *c) {
  if (c->head_dim <= 0 || c->head_dim % 2 != 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "rotary: head_dim %lld must be positive and even",
                     (long long)c->head_dim);
  if (!(c->theta > 0.0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "rotary: theta %g must be > 0",
                     c->theta);
  if (c->type == SRT_ROPE_LLAMA3) {
    if (!(c->factor > 0.0) || !(c->low_freq_factor > 0.0) ||
        !(c->original_max_position_embeddings > 0.0) ||
        !(c->high_freq_factor > c->low_freq_factor))
      return SRT_ERROR(
          SRT_INVALID_ARGUMENT,
          "rotary llama3: factor %g, low_freq_factor %g, high_freq_factor %g, "
          "original_max_position_embeddings %g: need all > 0 and high > low",
          c->factor, c->low_freq_factor, c->high_freq_factor,
          c->original_max_position_embeddings);
  } else if (c->type == SRT_ROPE_LINEAR) {
    if (!(c->factor > 0.0))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "rotary linear: factor %g must be > 0",
                       c->factor);
  } else if (c->type != SRT_ROPE_DEFAULT) {
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "rotary: unknown rope type %d",
                     (int)c->type);
  }
  return NULL;
}

srt_status srt_cpu_rotary_inv_freq(float *inv_freq,
                                   const srt_rope_config *config) {
  SRT_RETURN_IF_ERROR(check_config(config));
  int64_t half = config->head_dim / 2;
  for (int64_t i = 0; i < half; i++) {
    double f = 1.0 / pow(config->theta,
                         (double)(2 * i) / (double)config->head_dim);
    if (config->type == SRT_ROPE_LLAMA3) {
      // Llama 3.1's "NTK-by-parts"-like rule: keep high frequencies, divide
      // low ones by factor, blend linearly in wavelength-inverse between.
      double L = config->original_max_position_embeddings;
      double low_wavelen = L / config->low_freq_factor;
      double high_wavelen = L / config->high_freq_factor;
      double wavelen = 2.0 * kPi / f;
      if (wavelen > low_wavelen) {
        f = f / config->factor;
      } else if (!(wavelen < high_wavelen)) {
        double s = (L / wavelen - config->low_freq_factor) /
                   (config->high_freq_factor - config->low_freq_factor);
        f = (1.0 - s) * f / config->factor + s * f;
      }
    } else if (config->type == SRT_ROPE_LINEAR) {
      f = f / config->factor;
    }
    inv_freq[i] = (float)f;
  }
  return NULL;
}

srt_status srt_cpu_rotary_embedding_forward(float *cos_out, float *sin_out,
                                            const int64_t *position_ids,
                                            int64_t B, int64_t S,
                                            const srt_rope_config *config) {
  SRT_RETURN_IF_ERROR(check_config(config));
  if (B < 0 || S < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "rotary: B=%lld S=%lld negative",
                     (long long)B, (long long)S);
  int64_t hd = config->head_dim, half = hd / 2;
  // head_dim is a model constant (<= a few hundred): the frequencies fit on
  // the stack without an allocation.
  if (half > 4096)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "rotary: head_dim %lld > 8192",
                     (long long)hd);
  float inv_freq[4096];
  SRT_RETURN_IF_ERROR(srt_cpu_rotary_inv_freq(inv_freq, config));
#pragma omp parallel for schedule(static) if (B * S * hd > kChunk)
  for (int64_t t = 0; t < B * S; t++) {
    int64_t pos = position_ids ? position_ids[t] : t % S;
    float *c = cos_out + t * hd;
    float *sn = sin_out + t * hd;
    for (int64_t i = 0; i < half; i++) {
      // The angle is rounded to fp32 exactly as Hugging Face's fp32
      // inv_freq @ position_ids product is; cos/sin of it are then exact
      // to within float rounding.
      float angle = (float)pos * inv_freq[i];
      c[i] = c[i + half] = (float)cos((double)angle);
      sn[i] = sn[i + half] = (float)sin((double)angle);
    }
  }
  return NULL;
}

// One head of one token; reads both halves before writing either (in place).
SRT_CPU_CLONES
static void rotate_head(float *oh, const float *xh, const float *c, const float *s,
                        int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; i++) {
    float x1 = xh[i], x2 = xh[i + half];
    oh[i] = x1 * c[i] - x2 * s[i];
    oh[i + half] = x2 * c[i + half] + x1 * s[i + half];
  }
}

SRT_CPU_CLONES
static void unrotate_head(float *dh, const float *gh, const float *c, const float *s,
                          int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; i++) {
    float g1 = gh[i], g2 = gh[i + half];
    dh[i] = g1 * c[i] + g2 * s[i + half];
    dh[i + half] = g2 * c[i + half] - g1 * s[i];
  }
}

void srt_cpu_apply_rotary_serial(float *out, const float *x, const float *cos,
                                 const float *sin, int64_t tokens, int64_t heads,
                                 int64_t head_dim, bool backward) {
  int64_t half = head_dim / 2, width = heads * head_dim;
  for (int64_t t = 0; t < tokens; t++)
    for (int64_t h = 0; h < heads; h++)
      (backward ? unrotate_head : rotate_head)(out + t * width + h * head_dim,
                                               x + t * width + h * head_dim,
                                               cos + t * head_dim, sin + t * head_dim, half);
}

void srt_cpu_apply_rotary_forward(float *out, const float *x, const float *cos,
                                  const float *sin, int64_t B, int64_t S,
                                  int64_t heads, int64_t head_dim) {
  int64_t half = head_dim / 2, width = heads * head_dim;
#pragma omp parallel for schedule(static) if (B * S * width > kChunk)
  for (int64_t t = 0; t < B * S; t++)
    for (int64_t h = 0; h < heads; h++)
      rotate_head(out + t * width + h * head_dim, x + t * width + h * head_dim,
                  cos + t * head_dim, sin + t * head_dim, half);
}

void srt_cpu_apply_rotary_backward(float *dx, const float *dy, const float *cos,
                                   const float *sin, int64_t B, int64_t S,
                                   int64_t heads, int64_t head_dim) {
  int64_t half = head_dim / 2, width = heads * head_dim;
#pragma omp parallel for schedule(static) if (B * S * width > kChunk)
  for (int64_t t = 0; t < B * S; t++)
    for (int64_t h = 0; h < heads; h++)
      unrotate_head(dx + t * width + h * head_dim, dy + t * width + h * head_dim,
                    cos + t * head_dim, sin + t * head_dim, half);
}

//===----------------------------------------------------------------------===//
// Entry points of the cpu backend (srt_cpu_ops, shardrt/cpu.h): the kernels
// above on arena buffers
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_rotary_embedding(srt_exec *e, int64_t position_ids, int64_t cos,
                                       int64_t sin, int64_t batch, int64_t seq,
                                       int64_t head_dim, double theta,
                                       int64_t rope_type, double factor, double low_freq_factor,
                                       double high_freq_factor,
                                       int64_t original_max_positions) {
  srt_rope_config c = srt_op_rope_config(head_dim, theta, rope_type, factor, low_freq_factor,
                                         high_freq_factor, original_max_positions);
  return srt_cpu_rotary_embedding_forward(ops_f32(e, cos), ops_f32(e, sin),
                                          position_ids >= 0 ? ops_i64(e, position_ids) : NULL,
                                          batch, seq, &c);
}

srt_status srt_cpu_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin, int64_t y,
                                   int64_t batch, int64_t seq, int64_t heads,
                                   int64_t head_dim) {
  srt_cpu_apply_rotary_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, cos), ops_f32(e, sin),
                               batch, seq, heads, head_dim);
  return NULL;
}

srt_status srt_cpu_op_apply_rotary_grad(srt_exec *e, int64_t dy, int64_t cos, int64_t sin,
                                        int64_t dx, int64_t batch, int64_t seq, int64_t heads,
                                        int64_t head_dim) {
  srt_cpu_apply_rotary_backward(ops_f32(e, dx), ops_f32(e, dy), ops_f32(e, cos),
                                ops_f32(e, sin), batch, seq, heads, head_dim);
  return NULL;
}
