// libFuzzer target: the Hugging Face config.json parser
// (tools/shard-import/config.c): an accepted config is validated, so its
// sizes must be positive and the per-kind layer counts must add up.
#include <stdint.h>
#include <stdlib.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  import_config cfg;
  char err[2048] = "";
  if (!import_config_parse("fuzz/config.json", (const char *)data, size, &cfg, err,
                           sizeof err)) {
    if (!err[0])
      abort(); // a refusal says why
    return 0;
  }
  int64_t blocks = 0;
  for (int k = IMPORT_BLOCK_FULL; k <= IMPORT_BLOCK_MLP; ++k)
    blocks += import_config_count_blocks(&cfg, (import_block)k);
  if (cfg.vocab < 1 || cfg.hidden < 1 || cfg.heads < 1 || cfg.head_dim < 1 ||
      blocks != cfg.layers || !(cfg.eps > 0))
    abort();
  int line, col;
  static const char *const keys[] = {"hidden_size", "vocab_size", "rope_scaling.factor",
                                     "num_attention_heads", "no_such_key"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; ++i) {
    (void)import_config_locate(&cfg, keys[i], &line, &col);
    if (line < 1 || col < 1)
      abort();
  }
  import_config_free(&cfg);
  return 0;
}
