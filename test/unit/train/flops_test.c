// Model FLOPs per token (runtime/train/metrics.c, train_flops_per_token)
// against values worked out by hand from torchtitan's count
// (get_num_flop_per_token: 6 N + 12 L H D S) and, for NemotronH's Mamba2
// layers, Megatron-LM's mamba_layer_flops scan term (7 d_inner N forward,
// x 3 with the backward). Exact (float64 sums of integers).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "train_internal.h"

// A program of two parameters, an embedding [10, 4] and a weight [6, 5],
// with `config` as its config.json, at sequence length `seq`.
static double flops(const char *config, int64_t seq) {
  srt_param_info params[2] = {
      {.name = "model.embed_tokens.weight", .rank = 2, .global_shape = {10, 4}},
      {.name = "model.layers.0.mlp.up_proj.weight", .rank = 2, .global_shape = {6, 5}}};
  srt_program p = {.num_params = 2, .params = params, .seq = seq, .config_json = config};
  return train_flops_per_token(&p);
}

static void test_llama_every_layer_attends(void **state) {
  (void)state;
  const char *c = "{\"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"hidden_size\": 32}";
  // 6 x 30 (the embedding is no matmul) + 12 x 3 layers x 4 heads x 8 x 64
  assert_true(flops(c, 64) == 6.0 * 30 + 12.0 * 3 * 4 * 8 * 64);
  const char *tied = "{\"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"hidden_size\": 32,"
                     " \"head_dim\": 16, \"tie_word_embeddings\": true}";
  assert_true(flops(tied, 64) == 6.0 * 70 + 12.0 * 3 * 4 * 16 * 64);
}

// test/e2e/configs/tiny-nemotron_h.json's sizes: "M*-M-", 8 Mamba heads of
// 4, state 8; 4 attention heads of 8.
static const char *kNemotron =
    "{\"hybrid_override_pattern\": \"M*-M-\", \"num_hidden_layers\": 5,"
    " \"num_attention_heads\": 4, \"head_dim\": 8, \"hidden_size\": 32,"
    " \"mamba_num_heads\": 8, \"mamba_head_dim\": 4, \"ssm_state_size\": 8%s}";

static void test_nemotron_h_counts_mamba_scans(void **state) {
  (void)state;
  char c[512];
  snprintf(c, sizeof c, kNemotron, "");
  // one attention layer; two Mamba2 layers of d_inner 32, N 8
  double want = 6.0 * 30 + 12.0 * 1 * 4 * 8 * 64 + 21.0 * 2 * 32 * 8;
  assert_true(flops(c, 64) == want);
  // layers_block_type wins over the pattern, as in transformers 5 and
  // shard-import: three Mamba2 layers and two attention layers here.
  snprintf(c, sizeof c, kNemotron,
           ", \"layers_block_type\": [\"mamba\", \"attention\", \"linear_attention\","
           " \"full_attention\", \"mamba\"]");
  assert_true(flops(c, 64) == 6.0 * 30 + 12.0 * 2 * 4 * 8 * 64 + 21.0 * 3 * 32 * 8);
}

static void test_no_config_counts_parameters_only(void **state) {
  (void)state;
  assert_true(flops(NULL, 64) == 6.0 * 30);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_every_layer_attends),
      cmocka_unit_test(test_nemotron_h_counts_mamba_scans),
      cmocka_unit_test(test_no_config_counts_parameters_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
