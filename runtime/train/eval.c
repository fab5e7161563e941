// Evaluation (--eval-data): the mean loss of the program over the first K
// batches of a held-out token file, each a forward-only step
// (srt_step_options.forward_only: the compiled step stops after the loss
// and changes nothing), the same K batches at every evaluation.
#include "shardrt/profile.h"
#include "train_internal.h"

srt_status train_evaluate(const train_eval *ev, const srt_tokens *tokens, int64_t batches,
                          srt_step_options options, double *mean_loss) {
  srt_context *ctx = ev->exec->ctx;
  srt_profile *profile = srt_context_profile(ctx); // an evaluation is no training step
  srt_context_set_profile(ctx, NULL);
  options.forward_only = 1;
  double sum = 0;
  srt_status s = NULL;
  for (int64_t k = 1; k <= batches && !s; ++k) {
    srt_step_result r = {0}; // micro-batches: their token-weighted mean
    s = train_run_step(ev, tokens, NULL, k, options, NULL, &r);
    sum += r.loss; // identical on every rank: the loss is the global mean
  }
  srt_context_set_profile(ctx, profile);
  *mean_loss = sum / (double)batches;
  return s;
}
