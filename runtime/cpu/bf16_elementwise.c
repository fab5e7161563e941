// The bf16 cpu backend's elementwise and norm ops (bf16_elementwise.h):
// each names its operands and the fp32 kernel that one tile runs
// (bf16_rows.h); a norm's or bias's bf16 weight, one row, is widened once.
// The adds and GLU run their kernels' bf16 loops over chunks instead.
#include "bf16_elementwise.h"

#include <string.h>

#include "bf16_rows.h"
#include "ops_internal.h"
#include "shardrt/op_facts.h"
#include "vmath.h"

// A bf16 operand of `width` elements per row, and an fp32 one.
static srt_bf16_operand bf(int64_t at, int64_t width) {
  return (srt_bf16_operand){.at = at, .width = width};
}
static srt_bf16_operand f32(int64_t at, int64_t width) {
  return (srt_bf16_operand){.at = at, .width = width, .f32 = true};
}

// Runs r over rows of `width` (tiles of srt_bf16_tile_rows(width)) within
// the op's staging `st` (which holds its widened weight, if any).
static srt_status run(srt_bf16_stage *st, srt_bf16_rows r, int64_t width) {
  r.tile_rows = r.tile_rows > 0 ? r.tile_rows : srt_bf16_tile_rows(width);
  if (!st->error)
    srt_bf16_rows_run(st, &r);
  return srt_bf16_stage_end(st, NULL);
}

// The tiles' arguments besides the operands.
typedef struct tile_args {
  const float *weight;
  const uint16_t *table; // the embedding's bf16 rows
  const int64_t *ids;
  int64_t vocab_start, local_vocab;
  int64_t width, group, heads, head_dim;
  float eps, offset, scale;
  float *partials;
} tile_args;

//===----------------------------------------------------------------------===//
// add, bias_add, glu, embedding
//===----------------------------------------------------------------------===//

// The bf16 buffer at arena offset `at`.
static uint16_t *h16(srt_exec *e, int64_t at) {
  return (uint16_t *)(void *)(e->arena + at);
}

srt_status srt_cpu_bf16_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n,
                               int64_t dtype) {
  if (dtype == SRT_OP_F32)
    return srt_cpu_op_add(e, a, b, y, n, dtype);
  uint16_t *Y = h16(e, y);
  const uint16_t *A = h16(e, a), *B = h16(e, b);
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_cpu_add_bf16_serial(Y + i0, A + i0, B + i0, srt_chunk_end(i0, n) - i0);
  return NULL;
}

static void bias_add_tile(const void *ctx, float *const *op, int64_t r0, int64_t rows) {
  const tile_args *t = ctx;
  (void)r0;
  // A row plus the bias: srt_cpu_bias_add_forward's sums.
  for (int64_t r = 0; r < rows; r++)
    srt_cpu_add_serial(op[1] + r * t->width, op[0] + r * t->width, t->weight, t->width);
}

srt_status srt_cpu_bf16_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                                    int64_t f) {
  srt_bf16_stage st = srt_bf16_stage_begin(e, "srt_cpu_bf16_op_bias_add");
  int64_t B = srt_bf16_stage_in(&st, b, f);
  tile_args t = {.weight = ops_f32(e, B), .width = f};
  return run(&st, (srt_bf16_rows){.num_in = 1, .num_out = 1, .ops = {bf(x, f), bf(y, f)},
                                  .rows = n, .fn = bias_add_tile, .ctx = &t},
             f);
}

// GLU reads and writes bf16 in its own loops (glu.c), no tiles.
srt_status srt_cpu_bf16_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                               int64_t activation) {
  uint16_t *Y = h16(e, y);
  const uint16_t *G = h16(e, gate), *U = h16(e, up);
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_cpu_glu_forward_bf16_serial(Y + i0, G + i0, U + i0, srt_chunk_end(i0, n) - i0,
                                    (srt_glu_activation)activation);
  return NULL;
}

srt_status srt_cpu_bf16_op_glu_grad(srt_exec *e, int64_t gate, int64_t up, int64_t dy,
                                    int64_t dgate, int64_t dup, int64_t n, int64_t activation) {
  uint16_t *DG = h16(e, dgate), *DU = h16(e, dup);
  const uint16_t *G = h16(e, gate), *U = h16(e, up), *DY = h16(e, dy);
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_cpu_glu_backward_bf16_serial(DG + i0, DU + i0, DY + i0, G + i0, U + i0,
                                     srt_chunk_end(i0, n) - i0, (srt_glu_activation)activation);
  return NULL;
}

// Each token's row of the bf16 table widened (zero outside the local
// range), times the scale as srt_cpu_embedding_forward multiplies: the
// table is read where a token looks it up, never widened whole.
static void embedding_tile(const void *ctx, float *const *op, int64_t r0, int64_t rows) {
  const tile_args *t = ctx;
  for (int64_t r = 0; r < rows; r++) {
    float *o = op[0] + r * t->width;
    uint64_t row = (uint64_t)t->ids[r0 + r] - (uint64_t)t->vocab_start;
    if (row >= (uint64_t)t->local_vocab) {
      memset(o, 0, (size_t)t->width * sizeof *o);
      continue;
    }
    srt_bf16_widen_tile(o, t->table + (int64_t)row * t->width, t->width);
    if (t->scale != 1.0f)
      for (int64_t i = 0; i < t->width; i++)
        o[i] = o[i] * t->scale;
  }
}

srt_status srt_cpu_bf16_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                                     int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                                     double scale) {
  const char *op = "srt_cpu_bf16_op_embedding";
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &size));
  srt_bf16_stage st = srt_bf16_stage_begin(e, op);
  tile_args t = {.table = (const uint16_t *)(const void *)(e->arena + w), .ids = ops_i64(e, ids),
                 .vocab_start = index * local_vocab, .local_vocab = local_vocab,
                 .width = hidden, .scale = (float)scale};
  return run(&st, (srt_bf16_rows){.num_out = 1, .ops = {bf(y, hidden)}, .rows = n,
                                  .fn = embedding_tile, .ctx = &t},
             hidden);
}

//===----------------------------------------------------------------------===//
// RMSNorm: rows of one group (of the features where there is no grouping)
//===----------------------------------------------------------------------===//

// The group's width and the norm's rows of it.
static int64_t norm_width(int64_t features, int64_t group) {
  return group > 0 ? group : features;
}
static int64_t norm_rows(int64_t n, int64_t features, int64_t group) {
  int64_t g = norm_width(features, group);
  return g > 0 ? n * (features / g) : 0;
}

static void rms_norm_tile(const void *ctx, float *const *op, int64_t r0, int64_t rows) {
  const tile_args *t = ctx;
  (void)r0;
  srt_cpu_rms_norm_forward_serial(op[1], op[0], t->weight, rows, t->width, t->eps, t->offset);
}

srt_status srt_cpu_bf16_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                                    int64_t features, int64_t group, double eps,
                                    double offset) {
  srt_bf16_stage st = srt_bf16_stage_begin(e, "srt_cpu_bf16_op_rms_norm");
  int64_t g = norm_width(features, group), W = srt_bf16_stage_in(&st, w, g);
  tile_args t = {.weight = ops_f32(e, W), .width = g, .eps = (float)eps,
                 .offset = (float)offset};
  return run(&st, (srt_bf16_rows){.num_in = 1, .num_out = 1, .ops = {bf(x, g), bf(y, g)},
                                  .rows = norm_rows(n, features, group),
                                  .fn = rms_norm_tile, .ctx = &t},
             g);
}

// a + b rounded to bf16 (the sum's tile, rounded and widened back in
// place through a small buffer), then the norm of that rounded sum.
static void add_rms_norm_tile(const void *ctx, float *const *op, int64_t r0, int64_t rows) {
  const tile_args *t = ctx;
  (void)r0;
  int64_t n = rows * t->width;
  srt_cpu_add_serial(op[2], op[0], op[1], n);
  uint16_t rounded[512];
  for (int64_t i0 = 0; i0 < n; i0 += 512) {
    int64_t m = n - i0 < 512 ? n - i0 : 512;
    srt_bf16_round_tile(rounded, op[2] + i0, m);
    srt_bf16_widen_tile(op[2] + i0, rounded, m);
  }
  int64_t g = t->group > 0 ? t->group : t->width;
  srt_cpu_rms_norm_forward_serial(op[3], op[2], t->weight, n / g, g, t->eps, t->offset);
}

srt_status srt_cpu_bf16_op_add_rms_norm(srt_exec *e, int64_t a, int64_t b, int64_t sum,
                                        int64_t w, int64_t y, int64_t n, int64_t features,
                                        int64_t group, double eps, double offset) {
  srt_bf16_stage st = srt_bf16_stage_begin(e, "srt_cpu_bf16_op_add_rms_norm");
  int64_t W = srt_bf16_stage_in(&st, w, norm_width(features, group)), f = features;
  tile_args t = {.weight = ops_f32(e, W), .width = f, .group = group, .eps = (float)eps,
                 .offset = (float)offset};
  return run(&st, (srt_bf16_rows){.num_in = 2, .num_out = 2,
                                  .ops = {bf(a, f), bf(b, f), bf(sum, f), bf(y, f)},
                                  .rows = n, .fn = add_rms_norm_tile, .ctx = &t},
             f);
}

static void rms_norm_grad_input_tile(const void *ctx, float *const *op, int64_t r0,
                                     int64_t rows) {
  const tile_args *t = ctx;
  (void)r0;
  srt_cpu_rms_norm_backward_serial(op[2], op[1], op[0], t->weight, rows, t->width, t->eps,
                                   t->offset);
}

srt_status srt_cpu_bf16_op_rms_norm_grad_input(srt_exec *e, int64_t x, int64_t w, int64_t dy,
                                               int64_t dx, int64_t n, int64_t features,
                                               int64_t group, double eps, double offset) {
  srt_bf16_stage st = srt_bf16_stage_begin(e, "srt_cpu_bf16_op_rms_norm_grad_input");
  int64_t g = norm_width(features, group), W = srt_bf16_stage_in(&st, w, g);
  tile_args t = {.weight = ops_f32(e, W), .width = g, .eps = (float)eps,
                 .offset = (float)offset};
  return run(&st, (srt_bf16_rows){.num_in = 2, .num_out = 1,
                                  .ops = {bf(x, g), bf(dy, g), bf(dx, g)},
                                  .rows = norm_rows(n, features, group),
                                  .fn = rms_norm_grad_input_tile, .ctx = &t},
             g);
}

// One block of SRT_RMS_NORM_ROW_BLOCK rows (a tile): the fp32 kernel's
// partial sum of that block (the weight gradient does not read the weight).
static void rms_norm_grad_weight_tile(const void *ctx, float *const *op, int64_t r0,
                                      int64_t rows) {
  const tile_args *t = ctx;
  srt_cpu_rms_norm_weight_grad_block(t->partials + r0 / SRT_RMS_NORM_ROW_BLOCK * t->width,
                                     op[1], op[0], rows, t->width, t->eps);
}

srt_status srt_cpu_bf16_op_rms_norm_grad_weight(srt_exec *e, int64_t x, int64_t dy, int64_t dw,
                                                int64_t n, int64_t features, int64_t group,
                                                double eps) {
  srt_bf16_stage st = srt_bf16_stage_begin(e, "srt_cpu_bf16_op_rms_norm_grad_weight");
  int64_t g = norm_width(features, group), rows = norm_rows(n, features, group);
  int64_t blocks = (rows + SRT_RMS_NORM_ROW_BLOCK - 1) / SRT_RMS_NORM_ROW_BLOCK;
  int64_t P = srt_bf16_stage_scratch(&st, g * blocks);
  tile_args t = {.width = g, .eps = (float)eps, .partials = ops_f32(e, P)};
  SRT_RETURN_IF_ERROR(run(&st, (srt_bf16_rows){.num_in = 2, .ops = {bf(x, g), bf(dy, g)},
                                               .rows = rows,
                                               .tile_rows = SRT_RMS_NORM_ROW_BLOCK,
                                               .fn = rms_norm_grad_weight_tile, .ctx = &t},
                          g));
  // The blocks' partials summed in block order, as the fp32 kernel sums them.
  float *out = ops_f32(e, dw);
  ops_zero(out, g);
  for (int64_t b = 0; b < blocks; b++)
    for (int64_t i = 0; i < g; i++)
      out[i] += t.partials[b * g + i];
  return NULL;
}

//===----------------------------------------------------------------------===//
// Rotary: rows of one token (its heads), the fp32 tables' rows beside them
//===----------------------------------------------------------------------===//

static void rotary_tile(const void *ctx, float *const *op, int64_t r0, int64_t rows) {
  const tile_args *t = ctx;
  (void)r0;
  srt_cpu_apply_rotary_serial(op[3], op[0], op[1], op[2], rows, t->heads, t->head_dim, false);
}

static void rotary_grad_tile(const void *ctx, float *const *op, int64_t r0, int64_t rows) {
  const tile_args *t = ctx;
  (void)r0;
  srt_cpu_apply_rotary_serial(op[3], op[0], op[1], op[2], rows, t->heads, t->head_dim, true);
}

// in (bf16) -> out (bf16) over batch x seq tokens, one of the tiles above.
static srt_status rotary(srt_exec *e, const char *op, srt_bf16_tile_fn *fn, int64_t in,
                         int64_t cos, int64_t sin, int64_t out, int64_t tokens, int64_t heads,
                         int64_t head_dim) {
  srt_bf16_stage st = srt_bf16_stage_begin(e, op);
  tile_args t = {.heads = heads, .head_dim = head_dim};
  int64_t w = heads * head_dim;
  return run(&st, (srt_bf16_rows){.num_in = 3, .num_out = 1,
                                  .ops = {bf(in, w), f32(cos, head_dim), f32(sin, head_dim),
                                          bf(out, w)},
                                  .rows = tokens, .fn = fn, .ctx = &t},
             w);
}

srt_status srt_cpu_bf16_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin,
                                        int64_t y, int64_t batch, int64_t seq, int64_t heads,
                                        int64_t head_dim) {
  return rotary(e, "srt_cpu_bf16_op_apply_rotary", rotary_tile, x, cos, sin, y, batch * seq,
                heads, head_dim);
}

srt_status srt_cpu_bf16_op_apply_rotary_grad(srt_exec *e, int64_t dy, int64_t cos, int64_t sin,
                                             int64_t dx, int64_t batch, int64_t seq,
                                             int64_t heads, int64_t head_dim) {
  return rotary(e, "srt_cpu_bf16_op_apply_rotary_grad", rotary_grad_tile, dy, cos, sin, dx,
                batch * seq, heads, head_dim);
}
