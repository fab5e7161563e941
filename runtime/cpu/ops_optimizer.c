// The optimizer op of the cpu backend (shardrt/cpu.h): total gradient norm with each
// logical element counted once (srt_get_grad_norm over dp_cp then tp, with
// every parameter's placements), clipping by total norm folded into AdamW on
// every parameter — or nothing but the report when the norm is not finite, or
// for an evaluation (forward_only).
//
// Scratch (the context's op scratch): the table of gradient views,
// num_params srt_tensor structs.
#include <math.h>
#include <string.h>

#include "ops_internal.h"
#include "shardrt/grad_norm.h"
#include "shardrt/kernels.h"

// Gradient accumulation (srt_step_options.accumulate): every micro-batch
// but the last adds weight x its gradients to the driver's buffer; the last
// makes each gradient (buffer + weight x it) / total, the token-weighted
// mean over the whole batch, in double per element (rounded once).
static srt_status accumulate(srt_exec *e, const srt_program *program,
                             const srt_step_options *o) {
  if ((o->accumulate != 1 && o->accumulate != 2) || !o->grad_accum ||
      !(o->accum_weight >= 0) || (o->accumulate == 2 && !(o->accum_total >= 0)))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "srt_cpu_op_optimizer_step: accumulate %d needs a buffer, a weight >= 0 "
                     "and (on the last micro-batch) a total >= 0, got weight %g total %g",
                     (int)o->accumulate, (double)o->accum_weight, (double)o->accum_total);
  float *acc = o->grad_accum;
  double w = o->accum_weight, scale = o->accum_total > 0 ? 1.0 / o->accum_total : 0.0;
  for (int32_t i = 0; i < program->num_params; ++i) {
    const srt_param_info *p = &program->params[i];
    int64_t n = srt_shape_numel(p->rank, p->local_shape);
    float *g = (float *)(void *)(e->arena + p->grad_offset);
    if (o->accumulate == 1) {
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t k = 0; k < n; ++k)
        acc[k] = (float)((double)acc[k] + w * (double)g[k]);
    } else {
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t k = 0; k < n; ++k)
        g[k] = (float)(((double)acc[k] + w * (double)g[k]) * scale);
    }
    acc += n;
  }
  return NULL;
}

srt_status srt_cpu_op_optimizer_step(srt_exec *e, const srt_program *program,
                                     const srt_step_options *options, int64_t loss_offset,
                                     srt_step_result *result) {
  if (options->forward_only) { // an evaluation: the loss, nothing changed
    *result = (srt_step_result){.loss = *ops_f32(e, loss_offset)};
    return NULL;
  }
  if (options->accumulate) {
    SRT_RETURN_IF_ERROR(accumulate(e, program, options));
    if (options->accumulate == 1) { // a micro-batch before the last: no update yet
      *result = (srt_step_result){.loss = *ops_f32(e, loss_offset)};
      return NULL;
    }
  }
  int32_t n = program->num_params;
  float *table;
  int64_t floats = ((int64_t)(n > 0 ? n : 1) * (int64_t)sizeof(srt_tensor) + 3) / 4;
  SRT_RETURN_IF_ERROR(ops_scratch(e, floats, &table));
  srt_tensor *grads = (srt_tensor *)(void *)table;
  for (int32_t i = 0; i < n; ++i) {
    const srt_param_info *p = &program->params[i];
    srt_tensor *t = &grads[i];
    memset(t, 0, sizeof *t);
    t->name = p->name;
    t->dtype = SRT_F32;
    t->ndim = p->rank;
    memcpy(t->global_shape, p->global_shape, sizeof t->global_shape);
    memcpy(t->local_shape, p->local_shape, sizeof t->local_shape);
    t->placements[SRT_MESH_DP] = p->placement[SRT_MESH_DP];
    t->placements[SRT_MESH_TP] = p->placement[SRT_MESH_TP];
    t->data = e->arena + p->grad_offset;
  }

  srt_grad_norm_options no = srt_grad_norm_default_options();
  no.norm_type = options->norm_type;
  double norm = 0.0;
  SRT_RETURN_IF_ERROR(srt_get_grad_norm(grads, (size_t)n,
                                        srt_context_group(e->ctx, SRT_GROUP_DP_CP),
                                        srt_context_group(e->ctx, SRT_GROUP_TP), &no, &norm));
  result->loss = *ops_f32(e, loss_offset);
  result->grad_norm = norm;
  result->skipped = !isfinite(norm);
  if (result->skipped)
    return NULL;
  // Clipping by total norm (srt_clip_grad_by_total_norm's coefficient
  // max / (norm + 1e-6), applied when below 1) folded into AdamW's read of
  // each gradient, as on cuda: the bytes of scaling first, one pass over the
  // gradients fewer; the gradients themselves stay unscaled.
  float scale = 1.0f;
  if (options->max_grad_norm > 0) {
    if (isinf(options->max_grad_norm))
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "srt_cpu_op_optimizer_step: max_grad_norm must be finite, got %g",
                       (double)options->max_grad_norm);
    double c = (double)options->max_grad_norm / (norm + 1e-6);
    if (c < 1.0)
      scale = (float)c;
  }
  srt_adamw_config ac = {.lr = options->lr,
                         .beta1 = options->beta1,
                         .beta2 = options->beta2,
                         .eps = options->eps,
                         .weight_decay = options->weight_decay};
  // A parameter with a bf16 compute copy (the bf16 backend's programs) has
  // it refreshed from the updated master in the same pass.
  for (int32_t i = 0; i < n; ++i) {
    const srt_param_info *p = &program->params[i];
    srt_cpu_adamw_step_bf16((float *)(void *)(e->arena + p->offset),
                            p->compute_offset >= 0
                                ? (uint16_t *)(void *)(e->arena + p->compute_offset)
                                : NULL,
                            (float *)(void *)(e->arena + p->m_offset),
                            (float *)(void *)(e->arena + p->v_offset),
                            (const float *)(const void *)(e->arena + p->grad_offset),
                            scale, srt_tensor_local_numel(&grads[i]), options->step, &ac);
  }
  return NULL;
}
