// Evaluation (--eval-data): the mean loss of the program over the scored
// labels of the first K batches of a held-out token file, each a forward-only step
// (srt_step_options.forward_only: the compiled step stops after the loss
// and changes nothing), the same K batches at every evaluation.
#include <math.h>

#include "shardrt/profile.h"
#include "train_internal.h"

srt_status train_eval_check(const srt_program *p, const srt_tokens *tokens, const char *path,
                            int64_t packed_rows, int64_t batches) {
  // Batches that start inside the file: in packed rows (version 2) or in
  // windows of batch x seq tokens (version 1).
  int64_t have = packed_rows > 0 ? packed_rows : srt_tokens_count(tokens);
  int64_t per_batch = packed_rows > 0 ? p->batch : p->batch * p->seq;
  int64_t limit = have / per_batch + (have % per_batch != 0);
  if (limit < 1)
    limit = 1;
  if (batches <= limit)
    return NULL;
  return SRT_ERROR(SRT_INVALID_ARGUMENT,
                   "--eval-batches %lld: '%s' holds %lld %s, where batches of %lld x %lld "
                   "tokens start %lld times at most: batches past %lld would evaluate the same "
                   "tokens again (adding time, not data); give --eval-batches %lld or fewer, or "
                   "a larger --eval-data file",
                   (long long)batches, path, (long long)have,
                   packed_rows > 0 ? "packed rows" : "tokens", (long long)p->batch,
                   (long long)p->seq, (long long)limit, (long long)limit, (long long)limit);
}

srt_status train_evaluate(const train_eval *ev, const srt_tokens *tokens, int64_t batches,
                          srt_step_options options, double *mean_loss) {
  srt_context *ctx = ev->exec->ctx;
  srt_profile *profile = srt_context_profile(ctx); // an evaluation is no training step
  srt_context_set_profile(ctx, NULL);
  options.forward_only = 1;
  // The mean over every scored label of the K batches: each batch's mean
  // weighted by its count (packed SFT batches score different numbers of
  // completion tokens; one that scores none adds nothing, not a loss of 0).
  double sum = 0, total = 0;
  srt_status s = NULL;
  for (int64_t k = 1; k <= batches && !s; ++k) {
    srt_step_result r = {0}; // micro-batches: their token-weighted mean
    double scored = 0;       // identical on every rank: global figures
    s = train_run_step(ev, tokens, NULL, k, options, NULL, &r, &scored);
    if (scored > 0) {
      sum += r.loss * scored;
      total += scored;
    }
  }
  srt_context_set_profile(ctx, profile);
  *mean_loss = total > 0 ? sum / total : NAN;
  return s;
}
