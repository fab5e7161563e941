// Model FLOPs per token (tools/shard-import/flops.c, import_flops_per_token)
// against values worked out by hand from torchtitan's count
// (get_num_flop_per_token: 6 N + 12 L H D S) and, for NemotronH's Mamba2
// layers, Megatron-LM's mamba_layer_flops scan term (7 d_inner N forward,
// x 3 with the backward). Exact (float64 sums of integers).
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "flops.h"

enum { kMaxLayers = 8 };

// A model of two parameters, an embedding [10, 4] and a weight [6, 5],
// with layers `blocks` (n of them), `heads` attention heads of `head_dim`,
// Mamba2 mixers of `mamba_heads` x 4 with state 8, at sequence length 64.
static double flops(const import_block *blocks, int n, int64_t heads, int64_t head_dim,
                    int64_t mamba_heads, bool tie) {
  import_block layers[kMaxLayers];
  for (int i = 0; i < n; ++i)
    layers[i] = blocks[i];
  import_config cfg = {.layers = n, .blocks = layers, .heads = heads, .head_dim = head_dim,
                       .tie = tie, .mamba_heads = mamba_heads, .mamba_head_dim = 4,
                       .ssm_state = 8};
  import_param params[2] = {
      {.name = "model.embed_tokens.weight", .kind = IMPORT_PARAM_EMBEDDING, .rank = 2,
       .dims = {10, 4}},
      {.name = "model.layers.0.mlp.up_proj.weight", .kind = IMPORT_PARAM_MLP, .rank = 2,
       .dims = {6, 5}}};
  import_model model = {.params = params, .num_params = 2, .tied_to = -1};
  return import_flops_per_token(&cfg, &model, 64);
}

static void test_llama_every_layer_attends(void **state) {
  (void)state;
  const import_block full[3] = {IMPORT_BLOCK_FULL, IMPORT_BLOCK_FULL, IMPORT_BLOCK_FULL};
  // 6 x 30 (the embedding is no matmul) + 12 x 3 layers x 4 heads x 8 x 64
  assert_true(flops(full, 3, 4, 8, 0, false) == 6.0 * 30 + 12.0 * 3 * 4 * 8 * 64);
  // tied: the lm_head multiplies by the embedding (6 x 70)
  assert_true(flops(full, 3, 4, 16, 0, true) == 6.0 * 70 + 12.0 * 3 * 4 * 16 * 64);
}

static void test_sliding_layers_attend_too(void **state) {
  (void)state;
  // Gemma3: five sliding layers and a full one, every one attention
  const import_block gemma[6] = {IMPORT_BLOCK_SLIDING, IMPORT_BLOCK_SLIDING, IMPORT_BLOCK_SLIDING,
                                 IMPORT_BLOCK_SLIDING, IMPORT_BLOCK_SLIDING, IMPORT_BLOCK_FULL};
  assert_true(flops(gemma, 6, 4, 8, 0, true) == 6.0 * 70 + 12.0 * 6 * 4 * 8 * 64);
}

// test/e2e/configs/tiny-nemotron_h.json's sizes: "M*-M-", 8 Mamba heads of
// 4, state 8; 4 attention heads of 8.
static void test_nemotron_h_counts_mamba_scans(void **state) {
  (void)state;
  const import_block pattern[5] = {IMPORT_BLOCK_MAMBA, IMPORT_BLOCK_ATTENTION, IMPORT_BLOCK_MLP,
                                   IMPORT_BLOCK_MAMBA, IMPORT_BLOCK_MLP};
  // one attention layer; two Mamba2 layers of d_inner 32, N 8
  double want = 6.0 * 30 + 12.0 * 1 * 4 * 8 * 64 + 21.0 * 2 * 32 * 8;
  assert_true(flops(pattern, 5, 4, 8, 8, false) == want);
  // three Mamba2 layers and two attention layers
  const import_block other[5] = {IMPORT_BLOCK_MAMBA, IMPORT_BLOCK_ATTENTION, IMPORT_BLOCK_MAMBA,
                                 IMPORT_BLOCK_ATTENTION, IMPORT_BLOCK_MAMBA};
  assert_true(flops(other, 5, 4, 8, 8, false) ==
              6.0 * 30 + 12.0 * 2 * 4 * 8 * 64 + 21.0 * 3 * 32 * 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_every_layer_attends),
      cmocka_unit_test(test_sliding_layers_attend_too),
      cmocka_unit_test(test_nemotron_h_counts_mamba_scans),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
