// --dump: what the last step computed, as one consolidated safetensors file
// (loss, total and per-parameter gradient norms, the updated parameters and,
// when the program keeps them, the logits), for checks against a reference
// implementation (test/golden compares it with Hugging Face transformers).
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/checkpoint.h"
#include "shardrt/dtensor.h"
#include "shardrt/grad_norm.h"
#include "shardrt/tensor.h"
#include "train_internal.h"

// A view of `len` floats at `data`, shape [len], the same on every rank.
static srt_tensor replicated(const char *name, float *data) {
  srt_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dtype = SRT_F32;
  t.ndim = 1;
  t.global_shape[0] = t.local_shape[0] = 1;
  t.data = data;
  return t;
}


// The logits as a distributed tensor, checked against the program's table.
static srt_status logits_view(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              srt_tensor *t) {
  // Under cp the graph's view: each row cut into cp chunk rows.
  int64_t cp = p->cp > 1 ? p->cp : 1; // 0 in a hand-written table reads as 1
  const int64_t global[3] = {p->batch * cp, p->seq / cp, p->vocab};
  SRT_RETURN_IF_ERROR(srt_tensor_init(t, "logits", SRT_F32, 3, global, p->logits_placement,
                                      srt_context_placement_mesh(ctx)));
  for (int d = 0; d < 3; ++d)
    if (t->local_shape[d] != p->logits_local_shape[d])
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "program: the logits' local dim %d is %lld, but their placements on "
                       "this mesh give %lld",
                       d, (long long)p->logits_local_shape[d], (long long)t->local_shape[d]);
  int64_t bytes = srt_shape_numel(3, p->logits_local_shape) * 4;
  if (p->logits_offset < p->persistent_bytes || p->logits_offset + bytes > p->arena_bytes)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "program: the logits [%lld, %lld) lie outside the temporaries [%lld, %lld)",
                     (long long)p->logits_offset, (long long)(p->logits_offset + bytes),
                     (long long)p->persistent_bytes, (long long)p->arena_bytes);
  t->data = arena + p->logits_offset;
  return NULL;
}

// Under cp: the logits gathered into `*whole` [batch, seq, vocab] in token
// order, which *t (replicated) then views. The gathered rows are the dp x
// cp ranks' chunk rows, dp-major ((d cp + c) local_batch + r), each rank's
// two chunks per row (shardrt/cp.h).
static srt_status cp_logits(srt_context *ctx, const srt_program *p, srt_tensor *t,
                            float **whole) {
  int64_t cp = p->cp, lb = p->local_batch, chunk_row = p->seq / cp * p->vocab;
  size_t n = (size_t)(p->batch * p->seq * p->vocab);
  float *gathered = malloc(n * sizeof(float));
  *whole = malloc(n * sizeof(float));
  srt_status s = gathered && *whole ? srt_full_tensor(ctx, t, gathered)
                                    : SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "dump: out of memory");
  for (int64_t row = 0; row < p->batch && !s; ++row) {
    const void *parts[SRT_MAX_CP];
    for (int64_t c = 0; c < cp; ++c)
      parts[c] = gathered + ((row / lb * cp + c) * lb + row % lb) * chunk_row;
    s = srt_cp_gather(parts, 1, p->seq, (int)cp, (size_t)p->vocab * sizeof(float),
                      *whole + row * p->seq * p->vocab);
  }
  free(gathered);
  if (!s) {
    const srt_placement r[SRT_MESH_NDIMS] = {srt_replicate(), srt_replicate()};
    const int64_t shape[3] = {p->batch, p->seq, p->vocab};
    s = srt_tensor_init(t, "logits", SRT_F32, 3, shape, r, srt_context_placement_mesh(ctx));
    t->data = *whole;
  }
  return s;
}

srt_status train_dump(srt_context *ctx, const srt_program *p, uint8_t *arena, const char *path,
                      const srt_step_result *r, const train_options *o, int64_t step) {
  int32_t n = p->num_params;
  // Tensors: loss, grad_norm, n norms, n parameters, logits.
  size_t max = (size_t)(2 * n + 3);
  srt_tensor *views = calloc(max, sizeof *views);
  char **names = calloc((size_t)n + 1, sizeof *names);
  float *values = calloc((size_t)n + 2, sizeof *values);
  if (!views || !names || !values) {
    free(views);
    free(names);
    free(values);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "dump: out of memory");
  }
  // The step leaves the gradients unclipped (both backends fold clipping
  // into AdamW): these are the norms before clipping.
  srt_grad_norm_options no = srt_grad_norm_default_options();
  no.norm_type = o->norm_type;
  no.accum_dtype = SRT_F64;
  srt_status s = NULL;
  size_t k = 0;
  values[0] = r->loss;
  values[1] = (float)r->grad_norm;
  views[k++] = replicated("loss", &values[0]);
  views[k++] = replicated("grad_norm", &values[1]);
  for (int32_t i = 0; i < n && !s; ++i) {
    const srt_param_info *pi = &p->params[i];
    size_t len = strlen("grad_norm.") + strlen(pi->name) + 1;
    names[i] = malloc(len);
    if (!names[i]) {
      s = SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "dump: out of memory");
      break;
    }
    snprintf(names[i], len, "grad_norm.%s", pi->name);
    // One gradient at a time: each logical element counted once.
    srt_tensor g = train_param_view(pi, pi->name, arena, pi->grad_offset);
    double norm = 0;
    s = srt_get_grad_norm(&g, 1, srt_context_group(ctx, SRT_GROUP_DP_CP),
                          srt_context_group(ctx, SRT_GROUP_TP), &no, &norm);
    values[2 + i] = (float)norm;
    views[k++] = replicated(names[i], &values[2 + i]);
  }
  for (int32_t i = 0; i < n && !s; ++i)
    views[k++] = train_param_view(&p->params[i], p->params[i].name, arena, p->params[i].offset);
  float *whole = NULL; // the cp logits in token order
  if (!s && p->logits_kept)
    s = logits_view(ctx, p, arena, &views[k++]);
  if (!s && p->logits_kept && p->cp > 1)
    s = cp_logits(ctx, p, &views[k - 1], &whole);
  if (!s) {
    char step_s[32];
    snprintf(step_s, sizeof step_s, "%" PRId64, step);
    const char *meta[] = {"shardrt.step", step_s, "shardrt.model", p->model ? p->model : ""};
    s = srt_checkpoint_save_consolidated_meta(ctx, path, views, k, meta, 2);
  }
  free(whole);
  for (int32_t i = 0; i < n; ++i)
    free(names[i]);
  free(names);
  free(views);
  free(values);
  return s;
}
