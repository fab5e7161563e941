// The NemotronH hybrid stack: each layer is one block `x + mixer(norm(x))`
// whose mixer is a Mamba2 mixer ('M'), attention without RoPE ('*') or a
// relu2 MLP ('-'), as hybrid_override_pattern says. Parameter names follow
// the Hugging Face checkpoint (backbone.layers.N.mixer.*).
#include "nemotron_h.h"

#include "decoder.h"

// nn.mamba2_mixer under `base` ("backbone.layers.N.mixer").
static MlirValue mamba(import_graph *g, const char *base, MlirValue h) {
  const import_config *c = g->cfg;
  int64_t inner = c->mamba_heads * c->mamba_head_dim;
  int64_t conv = inner + 2 * c->n_groups * c->ssm_state;
  int64_t heads = c->mamba_heads;
  graph_at(g, base, "mamba_num_heads");
  // One statement per parameter: argument order must not depend on the
  // (unspecified) evaluation order of an initializer list.
  nn_mamba2_params p;
  p.in_proj_weight = graph_param(g, IMPORT_PARAM_MAMBA, 2,
                                 (int64_t[]){inner + conv + heads, c->hidden},
                                 "%s.in_proj.weight", base);
  p.conv1d_weight = graph_param(g, IMPORT_PARAM_MAMBA, 3,
                                (int64_t[]){conv, 1, c->conv_kernel},
                                "%s.conv1d.weight", base);
  p.conv1d_bias = graph_param(g, IMPORT_PARAM_MAMBA, 1, (int64_t[]){conv},
                              "%s.conv1d.bias", base);
  p.dt_bias = graph_param(g, IMPORT_PARAM_MAMBA, 1, (int64_t[]){heads},
                          "%s.dt_bias", base);
  p.A_log = graph_param(g, IMPORT_PARAM_MAMBA, 1, (int64_t[]){heads}, "%s.A_log",
                        base);
  p.D = graph_param(g, IMPORT_PARAM_MAMBA, 1, (int64_t[]){heads}, "%s.D", base);
  p.norm_weight = graph_param(g, IMPORT_PARAM_MAMBA, 1, (int64_t[]){inner},
                              "%s.norm.weight", base);
  p.out_proj_weight = graph_param(g, IMPORT_PARAM_MAMBA, 2,
                                  (int64_t[]){c->hidden, inner},
                                  "%s.out_proj.weight", base);
  // NemotronHPreTrainedModel._init_weights; the other weights are normal.
  graph_param_init(g, p.conv1d_bias, NN_INIT_ZEROS);
  graph_param_init(g, p.dt_bias, NN_INIT_DT_BIAS);
  graph_param_init(g, p.A_log, NN_INIT_A_LOG);
  graph_param_init(g, p.D, NN_INIT_ONES);
  graph_param_init(g, p.norm_weight, NN_INIT_ONES);
  nn_mamba2_config mc = {.num_heads = heads, .head_dim = c->mamba_head_dim,
                         .n_groups = c->n_groups, .state_size = c->ssm_state,
                         .conv_kernel = c->conv_kernel,
                         .chunk_size = c->chunk_size, .eps = c->mamba_eps,
                         .dt_min = c->mamba_dt_min,
                         .cp_size = g->opts->cp > 1 ? g->opts->cp : 1};
  // segment_ids: the mixer restarts at each packed document.
  return nn_build_mamba2_mixer(&g->b, base, h, g->segment_ids, &p, &mc);
}

// up_proj -> relu2 -> down_proj under `base`.
static MlirValue relu2_mlp(import_graph *g, const char *base, MlirValue h) {
  const import_config *c = g->cfg;
  const char *key = "intermediate_size";
  char m[IMPORT_NAME_MAX];
  MlirValue up = graph_linear(g, graph_name(m, "%s.up_proj", base), key,
                              IMPORT_PARAM_MLP, h, c->intermediate, c->hidden,
                              c->mlp_bias);
  graph_at(g, base, key);
  MlirValue act = nn_build_like(&g->b, NN_OP_RELU2, base, 1, &up, 0, NULL);
  return graph_linear(g, graph_name(m, "%s.down_proj", base), key,
                      IMPORT_PARAM_MLP, act, c->hidden, c->intermediate,
                      c->mlp_bias);
}

MlirValue import_build_nemotron_h(import_graph *g, MlirValue x) {
  const import_config *c = g->cfg;
  char l[IMPORT_NAME_MAX], m[IMPORT_NAME_MAX];
  for (int64_t i = 0; i < c->layers; ++i) {
    graph_name(l, "%s.layers.%lld", c->arch->prefix, (long long)i);
    MlirValue h = graph_rms_norm(g, graph_name(m, "%s.norm", l), x, c->hidden, 0);
    graph_name(m, "%s.mixer", l);
    switch (c->blocks[i]) {
    case IMPORT_BLOCK_MAMBA: h = mamba(g, m, h); break;
    case IMPORT_BLOCK_MLP: h = relu2_mlp(g, m, h); break;
    default: h = import_build_attention(g, m, h, NULL, NULL, 0); break;
    }
    graph_at(g, l, "hybrid_override_pattern");
    x = nn_build_like(&g->b, NN_OP_ADD, l, 2, (MlirValue[]){x, h}, 0, NULL);
  }
  return x;
}
