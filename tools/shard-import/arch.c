// The table of supported architectures and its lookups.
#include "arch.h"

#include <stdio.h>
#include <string.h>

// Gemma3ForConditionalGeneration's checkpoints: transformers keeps the
// modules as model.language_model / model.vision_tower /
// model.multi_modal_projector and lm_head in memory, and writes (4.x and
// 5.x save_pretrained, the published Gemma 3 4B/12B/27B) language_model.model,
// vision_tower, multi_modal_projector and language_model.lm_head on disk;
// it reads both (conversion_mapping.py, the "llava" renamings gemma3 uses).
// The vision tower and projector are not trained here: carried through.
static const char kGemma3Names[] =
    "carry model.vision_tower.\n"
    "carry model.multi_modal_projector.\n"
    "layout model.language_model.=language_model.model. lm_head.=language_model.lm_head. "
    "model.vision_tower.=vision_tower. model.multi_modal_projector.=multi_modal_projector.\n";

// padding_idx: transformers builds the embedding of Llama, Qwen2, Qwen3 and
// Gemma3 as nn.Embedding(vocab, hidden, config.pad_token_id)
// (modeling_<arch>.py; pad_token_id's defaults are in config_class.c);
// NemotronH's has no padding_idx.
static const import_arch kArchs[] = {
    {.architecture = "LlamaForCausalLM", .model_type = "llama",
     .config_class = "LlamaConfig", .family = IMPORT_DECODER, .prefix = "model",
     .embed = "embed_tokens", .final_norm = "norm", .activation_key = "hidden_act",
     .activation = "silu", .eps_key = "rms_norm_eps", .rope = true,
     .padding_idx = true},
    {.architecture = "Qwen2ForCausalLM", .model_type = "qwen2",
     .config_class = "Qwen2Config", .family = IMPORT_DECODER, .prefix = "model",
     .embed = "embed_tokens", .final_norm = "norm", .activation_key = "hidden_act",
     .activation = "silu", .eps_key = "rms_norm_eps", .qkv_bias = true,
     .rope = true, .padding_idx = true},
    {.architecture = "Qwen3ForCausalLM", .model_type = "qwen3",
     .config_class = "Qwen3Config", .family = IMPORT_DECODER, .prefix = "model",
     .embed = "embed_tokens", .final_norm = "norm", .activation_key = "hidden_act",
     .activation = "silu", .eps_key = "rms_norm_eps", .qk_norm = true,
     .rope = true, .padding_idx = true},
    {.architecture = "Gemma3ForCausalLM", .model_type = "gemma3_text",
     .config_class = "Gemma3TextConfig", .family = IMPORT_DECODER, .prefix = "model",
     .embed = "embed_tokens", .final_norm = "norm", .activation_key = "hidden_activation",
     .activation = "gelu_pytorch_tanh", .eps_key = "rms_norm_eps",
     .qk_norm = true, .sandwich_norms = true, .scale_embeddings = true, .local_rope = true,
     .rope = true, .query_scalar = true, .norm_offset = 1.0, .padding_idx = true},
    {.architecture = "Gemma3ForConditionalGeneration", .model_type = "gemma3_text",
     .top_model_type = "gemma3", .config_class = "Gemma3TextConfig",
     .top_config_class = "Gemma3Config", .family = IMPORT_DECODER,
     .text_config = "text_config", .prefix = "model.language_model", .embed = "embed_tokens",
     .final_norm = "norm", .activation_key = "hidden_activation",
     .activation = "gelu_pytorch_tanh", .eps_key = "rms_norm_eps",
     .qk_norm = true, .sandwich_norms = true, .scale_embeddings = true, .local_rope = true,
     .rope = true, .query_scalar = true, .norm_offset = 1.0, .padding_idx = true,
     .checkpoint_names = kGemma3Names},
    {.architecture = "NemotronHForCausalLM", .model_type = "nemotron_h",
     .config_class = "NemotronHConfig", .family = IMPORT_NEMOTRON_H, .prefix = "backbone",
     .embed = "embeddings", .final_norm = "norm_f", .activation_key = "mlp_hidden_act",
     .activation = "relu2", .eps_key = "layer_norm_epsilon"},
};

enum { kNumArchs = sizeof kArchs / sizeof *kArchs };

const import_arch *import_arch_by_name(const char *name) {
  for (int i = 0; i < kNumArchs; ++i)
    if (!strcmp(kArchs[i].architecture, name))
      return &kArchs[i];
  return NULL;
}

const import_arch *import_arch_by_model_type(const char *model_type) {
  for (int i = 0; i < kNumArchs; ++i) {
    const char *top = kArchs[i].top_model_type ? kArchs[i].top_model_type
                                               : kArchs[i].model_type;
    if (!strcmp(top, model_type))
      return &kArchs[i];
  }
  return NULL;
}

const char *import_arch_list(char *buf, unsigned long len) {
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < kNumArchs && n < len; ++i)
    n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "",
                          kArchs[i].architecture);
  return buf;
}
