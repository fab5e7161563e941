// One training step of the driver, micro-batch by micro-batch when the
// program accumulates gradients (shard-compile --micro-batch): the
// token-weighted mean over the whole batch, as one step of it computes.
#include <string.h>

#include "shardrt/collectives.h"
#include "train_internal.h"

// The labels the loss scores in the arena's micro-batch, summed over dp:
// labels[:, 1:] that are not -100 (the loss shifts them), as the loss's
// mean divides by.
static srt_status scored_labels(const train_eval *ev, double *count) {
  const srt_program *p = ev->program;
  const int64_t *labels = (const int64_t *)(const void *)(ev->arena + p->labels_offset);
  // Under cp the labels are already shifted (train_cp_split): every one counts.
  int64_t seq = train_local_seq(p), first = p->cp > 1 ? 0 : 1;
  double n = 0;
  for (int64_t r = 0; r < p->local_batch; ++r)
    for (int64_t s = first; s < seq; ++s)
      n += labels[r * seq + s] != -100;
  *count = n;
  return srt_all_reduce(srt_context_group(ev->exec->ctx, SRT_GROUP_DP_CP), count, 1, SRT_F64,
                        SRT_REDUCE_SUM);
}

// A batch can fail to load on some ranks only (their rows of a token file):
// every rank learns of it before any enters the step's collectives.
static srt_status agree(srt_context *ctx, srt_status s) {
  int32_t any = s != NULL;
  srt_status c = srt_all_reduce(srt_context_group(ctx, SRT_GROUP_WORLD), &any, 1, SRT_I32,
                                SRT_REDUCE_MAX);
  if (s) {
    srt_status_free(c);
    return s;
  }
  if (c)
    return c;
  return any ? SRT_ERROR(SRT_FAILED_PRECONDITION,
                         "train: another rank could not load its rows of the batch (it says "
                         "why)")
             : NULL;
}

static int64_t grad_floats(const srt_program *p) {
  int64_t n = 0;
  for (int32_t i = 0; i < p->num_params; ++i)
    n += srt_shape_numel(p->params[i].rank, p->params[i].local_shape);
  return n;
}

srt_status train_run_step(const train_eval *ev, const srt_tokens *tokens,
                          const char *batch_file, int64_t step, srt_step_options options,
                          float *grad_accum, srt_step_result *result, double *scored) {
  const srt_program *p = ev->program;
  srt_context *ctx = ev->exec->ctx;
  int64_t micros = p->grad_accum_steps > 1 ? p->grad_accum_steps : 1;
  bool accumulate = micros > 1 && !options.forward_only;
  if (accumulate && !grad_accum)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "train: a program of %lld micro-batches needs a "
                                           "gradient accumulation buffer",
                     (long long)micros);
  if (accumulate)
    memset(grad_accum, 0, (size_t)grad_floats(p) * sizeof *grad_accum);
  double total = 0, loss = 0;
  // At cp > 1 batches are loaded whole into the stage, then split.
  const srt_program *lp = ev->cp ? &ev->cp->view : p;
  uint8_t *dst = ev->cp ? ev->cp->rows : ev->arena;
  for (int64_t m = 0; m < micros; ++m) {
    srt_status s = NULL;
    if (tokens)
      s = train_load_batch(ctx, lp, dst, tokens, ev->plan, step, m);
    else if (batch_file && micros > 1) // a single batch stays loaded
      s = train_load_batch_file(ctx, lp, dst, batch_file, m);
    if (!s && ev->cp && (tokens || micros > 1))
      s = train_cp_stage_split(ev->cp, ctx, p, ev->arena);
    if (!s && (tokens || micros > 1)) // a device backend copies them over
      s = train_upload_batch(ev->backend, ev->exec->device, p, ev->arena);
    SRT_RETURN_IF_ERROR(agree(ctx, s));
    double weight = 1;
    if (micros > 1 || scored)
      SRT_RETURN_IF_ERROR(scored_labels(ev, &weight));
    total += weight;
    if (accumulate) {
      options.accumulate = m + 1 < micros ? 1 : 2;
      options.accum_weight = (float)weight;
      options.accum_total = (float)total;
      options.grad_accum = grad_accum;
    }
    ev->exec->one_document = train_one_document_rows(lp, dst); // of whole rows
    SRT_RETURN_IF_ERROR(p->step(ev->exec, &options, result));
    loss += weight * (double)result->loss;
  }
  if (micros > 1)
    result->loss = total > 0 ? (float)(loss / total) : 0.0f;
  if (scored)
    *scored = total;
  return NULL;
}
