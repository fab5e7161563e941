// A hand-written compiled step for the driver's tests: what shard-compile
// emits, for a tiny byte-level model (embedding -> RMSNorm -> lm_head with
// bias -> vocabulary-parallel cross-entropy) partitioned for a TINY_DP x
// TINY_TP mesh: lm_head is colwise (Shard(0) on tp), the loss split over
// the vocabulary, the embedding and norm replicated; gradients are summed
// over dp (the loss divides by the global token count).
// Build with -DTINY_DP=… -DTINY_TP=… [-DTINY_VOCAB=…] [-DTINY_HIDDEN=…].
#include "shardrt/cpu.h"
#include "shardrt/ops.h"
#include "shardrt/program.h"

#ifndef TINY_DP
#define TINY_DP 1
#endif
#ifndef TINY_TP
#define TINY_TP 1
#endif
#ifndef TINY_VOCAB
#define TINY_VOCAB 256
#endif
#ifndef TINY_HIDDEN
#define TINY_HIDDEN 32
#endif

enum {
  V = TINY_VOCAB,
  H = TINY_HIDDEN,
  B = 4,
  S = 16,
  LB = B / TINY_DP,
  LV = V / TINY_TP,
  N = LB * S,
};

#define AL(x) ((((int64_t)(x)) + 63) / 64 * 64)
// Persistent region: per parameter its value, gradient and moments.
#define P_EMB 0
#define P_NORM (P_EMB + 4 * AL(4 * V * H))
#define P_HEAD (P_NORM + 4 * AL(4 * H))
#define P_BIAS (P_HEAD + 4 * AL(4 * LV * H))
#define PERSIST (P_BIAS + 4 * AL(4 * LV))
#define VAL(p, numel) (p)
#define GRAD(p, numel) ((p) + AL(4 * (numel)))
#define MOM1(p, numel) ((p) + 2 * AL(4 * (numel)))
#define MOM2(p, numel) ((p) + 3 * AL(4 * (numel)))
// Activations.
#define A_IDS PERSIST
#define A_LABELS (A_IDS + AL(8 * N))
#define A_H (A_LABELS + AL(8 * N))
#define A_HN (A_H + AL(4 * N * H))
#define A_LOGITS (A_HN + AL(4 * N * H))
#define A_MAX (A_LOGITS + AL(4 * N * LV))
#define A_SUMS (A_MAX + AL(4 * N)) /* sum_exp [N] then target [N] */
#define A_SC (A_SUMS + AL(8 * N))
#define A_LOSS (A_SC + AL(8))
#define A_DLOGITS (A_LOSS + AL(4))
#define A_DHN (A_DLOGITS + AL(4 * N * LV))
#define A_DH (A_DHN + AL(4 * N * H))
#define ARENA (A_DH + AL(4 * N * H))

static const srt_param_info kParams[] = {
    {"model.embed_tokens.weight", SRT_INIT_NORMAL, 2, {V, H}, {V, H},
     {{SRT_REPLICATE, 0}, {SRT_REPLICATE, 0}},
     VAL(P_EMB, V * H), GRAD(P_EMB, V * H), MOM1(P_EMB, V * H), MOM2(P_EMB, V * H), -1, -1, 0, {0}},
    {"model.norm.weight", SRT_INIT_ONES, 1, {H}, {H},
     {{SRT_REPLICATE, 0}, {SRT_REPLICATE, 0}},
     VAL(P_NORM, H), GRAD(P_NORM, H), MOM1(P_NORM, H), MOM2(P_NORM, H), -1, -1, 0, {0}},
    {"lm_head.weight", SRT_INIT_NORMAL, 2, {V, H}, {LV, H},
     {{SRT_REPLICATE, 0}, {SRT_SHARD, 0}},
     VAL(P_HEAD, LV * H), GRAD(P_HEAD, LV * H), MOM1(P_HEAD, LV * H), MOM2(P_HEAD, LV * H), -1, -1, 0, {0}},
    {"lm_head.bias", SRT_INIT_ZEROS, 1, {V}, {LV},
     {{SRT_REPLICATE, 0}, {SRT_SHARD, 0}},
     VAL(P_BIAS, LV), GRAD(P_BIAS, LV), MOM1(P_BIAS, LV), MOM2(P_BIAS, LV), -1, -1, 0, {0}},
};

static srt_status tiny_step(srt_exec *e, const srt_step_options *o, srt_step_result *r);

const srt_program shard_program = {
    .abi = SRT_PROGRAM_ABI,
    .model = "tiny-byte-lm",
    .dp = TINY_DP,
    .tp = TINY_TP,
    .batch = B,
    .seq = S,
    .local_batch = LB,
    .grad_accum_steps = 1,
    .vocab = V,
    .initializer_range = 0.02,
    // 6 x the matmul parameters (the norm, lm_head's weight and bias; the
    // embedding is a lookup), no attention: as shard-import counts.
    .flops_per_token = 6.0 * (H + V * H + V),
    .arena_bytes = ARENA,
    .persistent_bytes = PERSIST,
    .input_ids_offset = A_IDS,
    .labels_offset = A_LABELS,
    .position_ids_offset = -1, // a step of one document per row: no rotary, no attention
    .segment_ids_offset = -1,
    .num_params = 4,
    .params = kParams,
    .step = tiny_step,
    .backend = &srt_cpu_backend,
};

#define TRY(x) SRT_RETURN_IF_ERROR(x)

static srt_status tiny_step(srt_exec *e, const srt_step_options *o, srt_step_result *r) {
  const int64_t emb = VAL(P_EMB, V * H), norm = VAL(P_NORM, H), head = VAL(P_HEAD, LV * H),
                bias = VAL(P_BIAS, LV);
  const int64_t g_emb = GRAD(P_EMB, V * H), g_norm = GRAD(P_NORM, H),
                g_head = GRAD(P_HEAD, LV * H), g_bias = GRAD(P_BIAS, LV);
  const int64_t sum_exp = A_SUMS, target = A_SUMS + 4 * N;
  // Forward.
  TRY(srt_op_embedding(e, A_IDS, emb, A_H, N, H, V, -1, 1.0));
  TRY(srt_op_rms_norm(e, A_H, norm, A_HN, N, H, H, 1e-6, 0.0));
  TRY(srt_op_linear(e, A_HN, head, bias, A_LOGITS, N, H, LV));
  TRY(srt_op_ce_logit_max(e, A_LOGITS, A_MAX, N, LV));
  TRY(srt_op_all_reduce(e, A_MAX, A_MAX, N, 1, 1, SRT_OP_F32));
  TRY(srt_op_ce_partial_sums(e, A_LOGITS, A_LABELS, A_MAX, sum_exp, target, LB, S, LV, 1,
                             -100, 1));
  TRY(srt_op_all_reduce(e, A_SUMS, A_SUMS, 2 * N, 1, 0, SRT_OP_F32));
  TRY(srt_op_ce_loss_sum(e, A_MAX, sum_exp, target, A_LABELS, A_SC, LB, S, -100, 1));
  TRY(srt_op_all_reduce(e, A_SC, A_SC, 2, 0, 0, SRT_OP_F32));
  TRY(srt_op_ce_mean(e, A_SC, A_LOSS));
  // Backward.
  TRY(srt_op_ce_logits_grad(e, A_LOGITS, A_LABELS, A_MAX, sum_exp, A_SC, A_DLOGITS, LB, S,
                            LV, 1, -100, 1));
  TRY(srt_op_linear_grad_weight(e, A_DLOGITS, A_HN, g_head, N, H, LV));
  TRY(srt_op_linear_grad_bias(e, A_DLOGITS, g_bias, N, LV));
  TRY(srt_op_linear_grad_input(e, A_DLOGITS, head, A_DHN, N, H, LV));
  TRY(srt_op_all_reduce(e, A_DHN, A_DHN, N * H, 1, 0, SRT_OP_F32)); // Partial over tp
  TRY(srt_op_rms_norm_grad_weight(e, A_H, A_DHN, g_norm, N, H, H, 1e-6));
  TRY(srt_op_rms_norm_grad_input(e, A_H, norm, A_DHN, A_DH, N, H, H, 1e-6, 0.0));
  TRY(srt_op_embedding_grad(e, A_IDS, A_DH, g_emb, N, H, V, -1, 1.0, -1));
  // Each dp rank holds its rows' addend of every gradient: sum over dp.
  TRY(srt_op_all_reduce(e, g_emb, g_emb, V * H, 0, 0, SRT_OP_F32));
  TRY(srt_op_all_reduce(e, g_norm, g_norm, H, 0, 0, SRT_OP_F32));
  TRY(srt_op_all_reduce(e, g_head, g_head, LV * H, 0, 0, SRT_OP_F32));
  TRY(srt_op_all_reduce(e, g_bias, g_bias, LV, 0, 0, SRT_OP_F32));
  return srt_op_optimizer_step(e, &shard_program, o, A_LOSS, r);
}
