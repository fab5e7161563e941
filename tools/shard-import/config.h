// A Hugging Face config.json, parsed and validated into the one description
// every graph builder reads: sizes, per-layer block kinds, RoPE settings and
// attention options, with transformers 4.x and 5.x spellings normalized.
#ifndef SHARD_IMPORT_CONFIG_H
#define SHARD_IMPORT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch.h"

/// What one layer (block) of the model is.
typedef enum import_block {
  IMPORT_BLOCK_FULL,      // decoder layer with full (global) causal attention
  IMPORT_BLOCK_SLIDING,   // decoder layer with sliding-window attention
  IMPORT_BLOCK_MAMBA,     // NemotronH 'M': Mamba2 mixer
  IMPORT_BLOCK_ATTENTION, // NemotronH '*': attention without RoPE
  IMPORT_BLOCK_MLP,       // NemotronH '-': MLP (up_proj, mlp_hidden_act, down_proj)
} import_block;

/// RoPE settings of one attention kind ("default", "llama3" or "linear").
typedef struct import_rope {
  double theta;
  char type[16];
  double factor;                                   // llama3 and linear
  double low_freq_factor, high_freq_factor;        // llama3 only
  int64_t original_max_position_embeddings;          // llama3 only
} import_rope;

typedef struct import_config {
  // Source, for messages and op locations. `text` is a copy the config owns.
  char *path;
  char *text;
  size_t text_len;
  const char *scope; // dotted path of the text config object ("" = top)

  const import_arch *arch;
  char dtype[16]; // torch_dtype / dtype as written ("" if absent)

  int64_t vocab, hidden, intermediate, layers;
  int64_t heads, kv_heads, head_dim;
  double eps;             // RMSNorm epsilon
  double initializer_range; // std of the normal init (default 0.02)
  bool tie;               // lm_head shares the embedding
  int64_t padding_idx;    // embedding row whose lookups get no gradient, or -1
  bool attention_bias;    // biases on q/k/v/o
  bool mlp_bias;          // biases on the MLP projections
  double attn_scale;      // softmax scale
  double attn_softcap;    // 0 = none
  int64_t sliding_window; // window of IMPORT_BLOCK_SLIDING layers
  import_rope rope;       // full-attention layers
  import_rope rope_local; // sliding layers when arch->local_rope
  import_block *blocks;   // [layers]

  // NemotronH Mamba2 mixer.
  int64_t mamba_heads, mamba_head_dim, n_groups, ssm_state, conv_kernel,
      chunk_size;
  double mamba_eps;
  double mamba_dt_min; // time_step_min: dt's lower clamp in the mixer's forward

  // Reports (heap strings of lines, NULL when empty): the config class
  // defaults applied to absent keys, "key = value (Class default, source)",
  // and warnings about keys the compiled step ignores, each a whole
  // `PATH:LINE:COL: warning: ...` line.
  char *defaults_used;
  char *warnings;
} import_config;

/// Parses `text` (`len` bytes, the contents of `path`) into `cfg`. On
/// failure writes one message to `err` (size `errlen`) of the form
/// `PATH:LINE:COL: error: ...` (position of the key involved, or of the JSON
/// syntax error; `PATH: error: ...` for a key that is missing), frees what
/// it allocated and returns false. On success the caller frees `cfg` with
/// import_config_free.
bool import_config_parse(const char *path, const char *text, size_t len,
                         import_config *cfg, char *err, size_t errlen);

/// Reads and parses the file at `path`, as import_config_parse.
bool import_config_load(const char *path, import_config *cfg, char *err,
                        size_t errlen);

/// Frees what `cfg` owns and zeroes it; safe on a zeroed or freed config.
void import_config_free(import_config *cfg);

/// Where key `key` of the text config (a dotted path below cfg->scope) is
/// written: 1-based line and column. Falls back to the text config object
/// itself, then to 1:1, and returns false when the key is not written.
bool import_config_locate(const import_config *cfg, const char *key, int *line,
                          int *col);

/// Number of layers of `kind`.
int64_t import_config_count_blocks(const import_config *cfg, import_block kind);

#endif // SHARD_IMPORT_CONFIG_H
