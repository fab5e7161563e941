// The configuration classes' tables. Values are the dataclass defaults (and
// __post_init__ fallbacks) of transformers 5.24.0's configuration_<model>.py
// files; keys transformers computes when absent (Llama's head_dim =
// hidden_size / num_attention_heads, num_key_value_heads =
// num_attention_heads) have no entry here: the parser derives them.
#include "config_class.h"

#include <string.h>

// Every PretrainedConfig: bookkeeping, generation and tokenizer settings.
static const char *const kCommonInert[] = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
    "_name_or_path", "use_cache", "bos_token_id", "eos_token_id", "sep_token_id",
    "decoder_start_token_id", "output_attentions", "output_hidden_states", "return_dict",
    "id2label", "label2id", "problem_type", "chunk_size_feed_forward", "is_encoder_decoder",
    "tokenizer_class", "prefix", "task_specific_params", "finetuning_task", "pruned_heads",
    "torchscript", "tie_encoder_decoder", "add_cross_attention", "auto_map",
    "cache_implementation", "_attn_implementation_autoset", "use_return_dict",
    // Dropout: checked to be 0 where it is read (config.c), the graph has none.
    "attention_dropout", "hidden_dropout", NULL};

// configuration_llama.py (LlamaConfig).
static const import_default kLlama[] = {
    {"vocab_size", "32000"},          {"hidden_size", "4096"},
    {"intermediate_size", "11008"},   {"num_hidden_layers", "32"},
    {"num_attention_heads", "32"},    {"hidden_act", "\"silu\""},
    {"max_position_embeddings", "2048"}, {"initializer_range", "0.02"},
    {"rms_norm_eps", "1e-6"},         {"pad_token_id", "null"},
    {"tie_word_embeddings", "false"}, {"attention_bias", "false"},
    {"mlp_bias", "false"},            {"rope_theta", "10000.0"},
    {NULL, NULL}};
static const char *const kLlamaInert[] = {"pretraining_tp", NULL};

// configuration_qwen2.py (Qwen2Config).
static const import_default kQwen2[] = {
    {"vocab_size", "151936"},         {"hidden_size", "4096"},
    {"intermediate_size", "22016"},   {"num_hidden_layers", "32"},
    {"num_attention_heads", "32"},    {"num_key_value_heads", "32"},
    {"hidden_act", "\"silu\""},       {"max_position_embeddings", "32768"},
    {"initializer_range", "0.02"},    {"rms_norm_eps", "1e-6"},
    {"tie_word_embeddings", "false"}, {"use_sliding_window", "false"},
    {"sliding_window", "4096"},       {"max_window_layers", "28"},
    {"pad_token_id", "null"},         {"rope_theta", "10000.0"},
    {NULL, NULL}};
// Qwen2.5's use_mrope (false): multimodal RoPE of Qwen2-VL, not Qwen2's.
static const char *const kQwen2Inert[] = {"use_mrope", NULL};

// configuration_qwen3.py (Qwen3Config): Qwen2's, plus head_dim and
// attention_bias.
static const import_default kQwen3[] = {
    {"vocab_size", "151936"},         {"hidden_size", "4096"},
    {"intermediate_size", "22016"},   {"num_hidden_layers", "32"},
    {"num_attention_heads", "32"},    {"num_key_value_heads", "32"},
    {"head_dim", "128"},              {"hidden_act", "\"silu\""},
    {"max_position_embeddings", "32768"}, {"initializer_range", "0.02"},
    {"rms_norm_eps", "1e-6"},         {"tie_word_embeddings", "false"},
    {"attention_bias", "false"},      {"use_sliding_window", "false"},
    {"sliding_window", "4096"},       {"max_window_layers", "28"},
    {"pad_token_id", "null"},         {"rope_theta", "10000.0"},
    {NULL, NULL}};

// configuration_gemma3.py (Gemma3TextConfig); sliding_window_pattern is
// read from the kwargs with 6, rope_theta and rope_local_base_freq are its
// default_theta (global 1e6, local 1e4).
static const import_default kGemma3Text[] = {
    {"vocab_size", "262208"},         {"hidden_size", "2304"},
    {"intermediate_size", "9216"},    {"num_hidden_layers", "26"},
    {"num_attention_heads", "8"},     {"num_key_value_heads", "4"},
    {"head_dim", "256"},              {"hidden_activation", "\"gelu_pytorch_tanh\""},
    {"max_position_embeddings", "131072"}, {"initializer_range", "0.02"},
    {"rms_norm_eps", "1e-6"},         {"pad_token_id", "0"},
    {"tie_word_embeddings", "true"},  {"attention_bias", "false"},
    {"query_pre_attn_scalar", "256"}, {"sliding_window", "4096"},
    {"sliding_window_pattern", "6"},  {"final_logit_softcapping", "null"},
    {"attn_logit_softcapping", "null"}, {"rope_theta", "1000000.0"},
    {"rope_local_base_freq", "10000.0"}, {NULL, NULL}};
static const char *const kGemma3TextInert[] = {"_sliding_window_pattern",
                                               "use_bidirectional_attention", NULL};

// configuration_gemma3.py (Gemma3Config, the conditional-generation model):
// the keys of its top level.
static const import_default kGemma3[] = {
    {"tie_word_embeddings", "true"}, {"initializer_range", "0.02"}, {NULL, NULL}};
// The vision tower and the image tokens: carried through, not trained.
static const char *const kGemma3Inert[] = {"text_config", "vision_config",
                                           "mm_tokens_per_image", "boi_token_index",
                                           "eoi_token_index", "image_token_index",
                                           "initializer_range", NULL};

// configuration_nemotron_h.py (NemotronHConfig).
static const import_default kNemotronH[] = {
    {"vocab_size", "131072"},         {"hidden_size", "4096"},
    {"tie_word_embeddings", "false"}, {"num_attention_heads", "32"},
    {"num_key_value_heads", "8"},     {"head_dim", "128"},
    {"max_position_embeddings", "4096"}, {"attention_bias", "false"},
    {"intermediate_size", "21504"},   {"mlp_hidden_act", "\"relu2\""},
    {"mlp_bias", "false"},            {"ssm_state_size", "128"},
    {"mamba_num_heads", "128"},       {"mamba_head_dim", "64"},
    {"mamba_hidden_act", "\"silu\""}, {"n_groups", "8"},
    {"conv_kernel", "4"},             {"use_conv_bias", "true"},
    {"chunk_size", "128"},            {"use_bias", "false"},
    {"initializer_range", "0.02"},    {"layer_norm_epsilon", "1e-5"},
    {NULL, NULL}};
// Initialisation (dt's max and floor), kernels, caches, and the MoE /
// multi-token-prediction settings (a "moe" block is refused). time_step_min
// is read (the mixer clamps dt to [time_step_min, inf)); time_step_limit is
// inert: transformers 5.24's mixer sets its limit from time_step_min and
// never reads it.
static const char *const kNemotronHInert[] = {
    "time_step_limit", "mamba_dt_limit", "use_mamba_kernels", "expand", "mamba_expand", "time_step_max", "time_step_floor",
    "mamba_dt_max", "mamba_dt_init_floor", "mamba_ssm_cache_dtype", "residual_in_fp32", "rescale_prenorm_residual",
    "num_logits_to_keep", "mamba_proj_bias", "sliding_window", "pad_token_id",
    "n_routed_experts", "output_router_logits", "n_shared_experts", "moe_intermediate_size",
    "moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap",
    "num_experts_per_tok", "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob",
    "num_nextn_predict_layers", "mtp_layers_block_type", "mtp_hybrid_override_pattern",
    "mamba_chunk_size",
    // The remote code's spelling; NemotronH's RMSNorms read layer_norm_epsilon.
    "rms_norm_eps", NULL};

static const char *const kNone[] = {NULL};

static const import_config_class kClasses[] = {
    {"LlamaConfig", "transformers 5.24.0 models/llama/configuration_llama.py", kLlama,
     kLlamaInert},
    {"Qwen2Config", "transformers 5.24.0 models/qwen2/configuration_qwen2.py", kQwen2,
     kQwen2Inert},
    {"Qwen3Config", "transformers 5.24.0 models/qwen3/configuration_qwen3.py", kQwen3, kNone},
    {"Gemma3TextConfig", "transformers 5.24.0 models/gemma3/configuration_gemma3.py",
     kGemma3Text, kGemma3TextInert},
    {"Gemma3Config", "transformers 5.24.0 models/gemma3/configuration_gemma3.py", kGemma3,
     kGemma3Inert},
    {"NemotronHConfig", "transformers 5.24.0 models/nemotron_h/configuration_nemotron_h.py",
     kNemotronH, kNemotronHInert},
};

const import_config_class *import_config_class_by_name(const char *name) {
  for (size_t i = 0; name && i < sizeof kClasses / sizeof *kClasses; ++i)
    if (!strcmp(kClasses[i].name, name))
      return &kClasses[i];
  return NULL;
}

const char *import_config_class_default(const import_config_class *cls, const char *key) {
  for (const import_default *d = cls ? cls->defaults : NULL; d && d->key; ++d)
    if (!strcmp(d->key, key))
      return d->value;
  return NULL;
}

int import_config_class_inert(const import_config_class *cls, const char *key) {
  for (const char *const *k = kCommonInert; *k; ++k)
    if (!strcmp(*k, key))
      return 1;
  for (const char *const *k = cls ? cls->inert : kNone; *k; ++k)
    if (!strcmp(*k, key))
      return 1;
  return 0;
}
