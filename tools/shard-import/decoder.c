// The transformer decoder stack of Llama, Qwen2, Qwen3 and Gemma3: rotary
// tables, then per layer attention and a gated MLP around residual adds,
// with the differences between architectures taken from import_arch traits.
#include "decoder.h"

#include <string.h>

// Builds the rotary tuple of `rope` at `module`.
static void rotary(import_graph *g, const char *module, const char *key,
                   const import_rope *rope, MlirValue *cos, MlirValue *sin) {
  graph_at(g, module, key);
  nn_rope r = {.head_dim = g->cfg->head_dim, .theta = rope->theta,
               .rope_type = rope->type, .factor = rope->factor,
               .low_freq_factor = rope->low_freq_factor,
               .high_freq_factor = rope->high_freq_factor,
               .original_max_position_embeddings =
                   rope->original_max_position_embeddings};
  // The graph's rows (one cp rank's chunk rows under context parallelism).
  nn_shape ids;
  nn_shape_of(mlirValueGetType(g->position_ids), &ids);
  nn_build_rotary_embedding(&g->b, module, &r, g->position_ids, ids.dims[0], ids.dims[1],
                            g->element, cos, sin);
}

// The config key a rotary table comes from: 5.x rope_parameters, else the
// 4.x key `key4`.
static const char *rope_key(const import_graph *g, const char *key4) {
  int line, col;
  return import_config_locate(g->cfg, "rope_parameters", &line, &col)
             ? "rope_parameters"
             : key4;
}

MlirValue import_build_attention(import_graph *g, const char *base, MlirValue h,
                                 const MlirValue *cos, const MlirValue *sin,
                                 int64_t window) {
  const import_config *c = g->cfg;
  const char *key = "num_attention_heads";
  int64_t q_out = c->heads * c->head_dim, kv_out = c->kv_heads * c->head_dim;
  bool qkv_bias = c->arch->qkv_bias || c->attention_bias;
  char m[IMPORT_NAME_MAX];
  MlirValue q = graph_linear(g, graph_name(m, "%s.q_proj", base), key,
                             IMPORT_PARAM_ATTENTION, h, q_out, c->hidden, qkv_bias);
  MlirValue k = graph_linear(g, graph_name(m, "%s.k_proj", base), key,
                             IMPORT_PARAM_ATTENTION, h, kv_out, c->hidden, qkv_bias);
  MlirValue v = graph_linear(g, graph_name(m, "%s.v_proj", base), key,
                             IMPORT_PARAM_ATTENTION, h, kv_out, c->hidden, qkv_bias);
  if (c->arch->qk_norm) {
    q = graph_rms_norm(g, graph_name(m, "%s.q_norm", base), q, c->head_dim,
                       c->head_dim);
    k = graph_rms_norm(g, graph_name(m, "%s.k_norm", base), k, c->head_dim,
                       c->head_dim);
  }
  graph_at(g, base, key);
  if (cos) {
    nn_attr head_dim = NN_INT("head_dim", c->head_dim);
    q = nn_build_like(&g->b, NN_OP_APPLY_ROTARY, base, 3, (MlirValue[]){q, *cos, *sin}, 1,
                      &head_dim);
    k = nn_build_like(&g->b, NN_OP_APPLY_ROTARY, base, 3, (MlirValue[]){k, *cos, *sin}, 1,
                      &head_dim);
  }
  nn_attention_config ac = {.num_heads = c->heads, .num_kv_heads = c->kv_heads,
                            .head_dim = c->head_dim, .causal = true,
                            .scale = c->attn_scale, .sliding_window = window,
                            .softcap = c->attn_softcap,
                            .cp_size = g->opts->cp > 1 ? g->opts->cp : 1};
  MlirValue a = nn_build_attention(&g->b, base, q, k, v, g->segment_ids, &ac);
  return graph_linear(g, graph_name(m, "%s.o_proj", base), key,
                      IMPORT_PARAM_ATTENTION, a, c->hidden, q_out,
                      c->attention_bias);
}

// The nn.glu activation of each MLP activation (transformers' ACT2FN name,
// the config's hidden_act / hidden_activation) a gated MLP computes. The
// config reader accepts only the architecture's own value (import_arch's
// `activation`); one missing here passes through unchanged, which nn.glu's
// verifier refuses, naming the op and the value.
static const struct {
  const char *hidden_act, *glu;
} kGluActivations[] = {{"silu", "silu"}, {"gelu_pytorch_tanh", "gelu_tanh"}};

static const char *glu_activation(const char *hidden_act) {
  for (size_t i = 0; i < sizeof kGluActivations / sizeof *kGluActivations; ++i)
    if (!strcmp(kGluActivations[i].hidden_act, hidden_act))
      return kGluActivations[i].glu;
  return hidden_act;
}

// gate_proj / up_proj -> nn.glu -> down_proj under `base` ("...layers.N.mlp").
static MlirValue gated_mlp(import_graph *g, const char *base, MlirValue h) {
  const import_config *c = g->cfg;
  const char *key = "intermediate_size";
  char m[IMPORT_NAME_MAX];
  MlirValue gate = graph_linear(g, graph_name(m, "%s.gate_proj", base), key,
                                IMPORT_PARAM_MLP, h, c->intermediate, c->hidden,
                                c->mlp_bias);
  MlirValue up = graph_linear(g, graph_name(m, "%s.up_proj", base), key,
                              IMPORT_PARAM_MLP, h, c->intermediate, c->hidden,
                              c->mlp_bias);
  graph_at(g, base, key);
  MlirValue act =
      nn_build_like(&g->b, NN_OP_GLU, base, 2, (MlirValue[]){gate, up}, 1,
                    (nn_attr[]){NN_STR("activation", glu_activation(c->arch->activation))});
  return graph_linear(g, graph_name(m, "%s.down_proj", base), key,
                      IMPORT_PARAM_MLP, act, c->hidden, c->intermediate,
                      c->mlp_bias);
}

// One layer: x + attn(norm(x)), then x + mlp(norm(x)); with sandwich norms
// (Gemma) each sub-block's output is normalized again before the add.
static MlirValue layer(import_graph *g, int64_t i, MlirValue x,
                       const MlirValue *cos, const MlirValue *sin,
                       int64_t window) {
  const import_config *c = g->cfg;
  bool sandwich = c->arch->sandwich_norms;
  char l[IMPORT_NAME_MAX], m[IMPORT_NAME_MAX];
  graph_name(l, "%s.layers.%lld", c->arch->prefix, (long long)i);

  MlirValue h = graph_rms_norm(g, graph_name(m, "%s.input_layernorm", l), x,
                               c->hidden, 0);
  h = import_build_attention(g, graph_name(m, "%s.self_attn", l), h, cos, sin,
                             window);
  if (sandwich)
    h = graph_rms_norm(g, graph_name(m, "%s.post_attention_layernorm", l), h,
                       c->hidden, 0);
  graph_at(g, l, "num_hidden_layers");
  x = nn_build_like(&g->b, NN_OP_ADD, l, 2, (MlirValue[]){x, h}, 0, NULL);

  h = graph_rms_norm(g,
                     graph_name(m, sandwich ? "%s.pre_feedforward_layernorm"
                                            : "%s.post_attention_layernorm",
                                l),
                     x, c->hidden, 0);
  h = gated_mlp(g, graph_name(m, "%s.mlp", l), h);
  if (sandwich)
    h = graph_rms_norm(g, graph_name(m, "%s.post_feedforward_layernorm", l), h,
                       c->hidden, 0);
  graph_at(g, l, "num_hidden_layers");
  return nn_build_like(&g->b, NN_OP_ADD, l, 2, (MlirValue[]){x, h}, 0, NULL);
}

MlirValue import_build_decoder(import_graph *g, MlirValue x) {
  const import_config *c = g->cfg;
  bool sliding = import_config_count_blocks(c, IMPORT_BLOCK_SLIDING) > 0;
  bool full = import_config_count_blocks(c, IMPORT_BLOCK_FULL) > 0;
  bool local = c->arch->local_rope && sliding;
  char m[IMPORT_NAME_MAX];

  // One rotary table per distinct RoPE configuration. Gemma3's sliding
  // layers use their own base frequency (rope_local_base_freq): that table
  // is "<prefix>.rotary_emb_local", as the Hugging Face module is named.
  MlirValue cos = {NULL}, sin = {NULL}, cos_local = {NULL}, sin_local = {NULL};
  if (full || !local)
    rotary(g, graph_name(m, "%s.rotary_emb", c->arch->prefix),
           rope_key(g, "rope_theta"), &c->rope, &cos, &sin);
  if (local)
    rotary(g, graph_name(m, "%s.rotary_emb_local", c->arch->prefix),
           rope_key(g, "rope_local_base_freq"), &c->rope_local, &cos_local,
           &sin_local);

  for (int64_t i = 0; i < c->layers; ++i) {
    bool is_sliding = c->blocks[i] == IMPORT_BLOCK_SLIDING;
    bool use_local = is_sliding && local;
    x = layer(g, i, x, use_local ? &cos_local : &cos, use_local ? &sin_local : &sin,
              is_sliding ? c->sliding_window : 0);
  }
  return x;
}
