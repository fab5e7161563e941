// The architectures shard-import knows, as data: one row per Hugging Face
// architecture with the traits the graph builders consult (biases, q/k
// norms, Gemma's norm offset and embedding scale, module names, defaults),
// so that builders branch on traits, never on model names.
#ifndef SHARD_IMPORT_ARCH_H
#define SHARD_IMPORT_ARCH_H

#include <stdbool.h>
#include <stdint.h>

typedef enum import_family {
  IMPORT_DECODER,    // attention + gated MLP per layer (Llama, Qwen, Gemma)
  IMPORT_NEMOTRON_H, // one block per layer: Mamba2, attention or MLP
} import_family;

typedef struct import_arch {
  const char *architecture;    // `architectures[0]`, e.g. "Qwen2ForCausalLM"
  const char *model_type;      // `model_type` of the (text) config
  const char *top_model_type;  // `model_type` of the top-level config if it
                               // differs (composite models), else NULL
  import_family family;
  const char *text_config;     // key of the nested text config, or NULL
  const char *prefix;          // module prefix of the decoder stack
  const char *embed;           // embedding module under `prefix`
  const char *final_norm;      // final norm module under `prefix`
  const char *activation_key;  // config key naming the MLP activation
  const char *activation;      // the only value accepted there
  const char *eps_key;         // config key of the RMSNorm epsilon
  bool qkv_bias;               // q/k/v biases regardless of attention_bias
  bool qk_norm;                // q_norm / k_norm before RoPE
  bool sandwich_norms;         // Gemma: post-attention, pre-/post-feedforward
  bool scale_embeddings;       // Gemma: embeddings times sqrt(hidden)
  bool local_rope;             // sliding layers use rope_local_base_freq
  bool query_scalar;           // scale = query_pre_attn_scalar ** -0.5
  bool rope;                   // attention applies RoPE
  double norm_offset;          // RMSNorm multiplies by (offset + w)
  bool padding_idx;            // the embedding's padding_idx is pad_token_id
  const char *config_class;     // transformers class of the (text) config
  const char *top_config_class; // class of the top level of a composite config
  const char *checkpoint_names; // layouts and carried modules of its checkpoints
                                // (shardrt/checkpoint_names.h), or NULL
} import_arch;

/// The row whose `architecture` equals `name`, or NULL.
const import_arch *import_arch_by_name(const char *name);

/// The first row whose top-level model_type (top_model_type, else
/// model_type) equals `model_type`, or NULL.
const import_arch *import_arch_by_model_type(const char *model_type);

/// Writes the supported architecture names, comma-separated, into `buf`.
const char *import_arch_list(char *buf, unsigned long len);

#endif // SHARD_IMPORT_ARCH_H
