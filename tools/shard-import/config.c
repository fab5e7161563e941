// Parsing config.json with jansson: architecture detection, what each key
// means and its range (read through config_reader.h's typed lookups), both
// transformers spellings (4.x rope_theta / rope_scaling / torch_dtype, 5.x
// rope_parameters / layer_types / dtype), and the consistency checks that
// make impossible models an error here rather than a broken graph later.
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_class.h"
#include "config_reader.h"
#include "nn.h"
#include "source.h"

// Layers beyond this are rejected before the graph is built op by op: each
// layer holds one parameter tensor at least, and a compiled step takes at
// most NN_MAX_FUNC_ARGS arguments, four of them the input ids, labels,
// position ids and segment ids (the compiler's limit: one constant for both).
static const int64_t kMaxLayers = NN_MAX_FUNC_ARGS - 4;

// The ranges of the config's numbers (reader_range: (lo, hi]).
static const reader_range kEps = {0, 1};          // rms_norm_eps, layer_norm_epsilon
static const reader_range kInitStd = {1e-8, 1};   // initializer_range
static const reader_range kRopeBase = {1, 1e12};  // rope_theta, rope_local_base_freq
static const reader_range kScale = {0, 1e6};      // query_pre_attn_scalar, softcaps

__attribute__((format(printf, 3, 4))) static void warn(import_reader *p, const char *key,
                                                       const char *fmt, ...);
static const reader_range kRopeFactor = {0, 1e4}; // llama3 factor and frequency factors

// pad_token_id, the embedding's padding_idx where transformers makes it one
// (arch->padding_idx): absent, the config class's default (config_class.c);
// null, none; a
// negative id counts from the end (torch's padding_idx); outside [-vocab,
// vocab) refused, as torch's nn.Embedding refuses it.
static bool get_padding_idx(import_reader *p, const json_t *o, import_config *c) {
  c->padding_idx = -1;
  if (!c->arch->padding_idx)
    return true;
  reader_mark_seen(p, false, "pad_token_id");
  const json_t *raw = json_object_get(o, "pad_token_id");
  if (raw && json_is_null(raw))
    return true;
  reader_key k;
  const json_t *v = reader_lookup(p, &k, o, "", "pad_token_id");
  if (!v) // absent with a None default
    return true;
  if (!json_is_integer(v))
    return reader_fail(p, k.rel, "key '%s' must be an integer or null, got %s", k.full,
                       reader_type_name(v));
  json_int_t id = json_integer_value(v);
  if (id < -c->vocab || id >= c->vocab)
    return reader_fail(p, k.rel,
                       "key '%s' is %lld, outside the vocabulary [-%lld, %lld) (it is the "
                       "embedding's padding_idx)",
                       k.full, (long long)id, (long long)c->vocab, (long long)c->vocab);
  c->padding_idx = id < 0 ? c->vocab + id : id;
  return true;
}

//===----------------------------------------------------------------------===//
// Architecture
//===----------------------------------------------------------------------===//

// Finds the architecture from `architectures` (first entry) or `model_type`.
static bool parse_arch(import_reader *p) {
  static const import_arch kNone = {.architecture = "unknown architecture"};
  import_config *c = p->cfg;
  c->arch = &kNone;
  char list[512];
  const json_t *archs = json_object_get(p->root, "architectures");
  const json_t *type = json_object_get(p->root, "model_type");
  if (type && !json_is_string(type) && !json_is_null(type))
    return reader_fail(p, "model_type", "key 'model_type' must be a string, got %s",
                       reader_type_name(type));
  const char *model_type = json_is_string(type) ? json_string_value(type) : NULL;
  if (archs && !json_is_null(archs)) {
    if (!json_is_array(archs) || json_array_size(archs) == 0 ||
        !json_is_string(json_array_get(archs, 0)))
      return reader_fail(p, "architectures",
                         "key 'architectures' must be a non-empty array of strings");
    const char *name = json_string_value(json_array_get(archs, 0));
    c->arch = import_arch_by_name(name);
    if (!c->arch) {
      c->arch = &kNone;
      return reader_fail(p, "architectures", "unknown architecture '%s' (supported: %s)", name,
                         import_arch_list(list, sizeof list));
    }
    const char *want = c->arch->top_model_type ? c->arch->top_model_type
                                               : c->arch->model_type;
    if (model_type && strcmp(model_type, want))
      return reader_fail(p, "model_type",
                         "architecture '%s' has model_type '%s', but the config says '%s'", name,
                         want, model_type);
  } else if (model_type) {
    c->arch = import_arch_by_model_type(model_type);
    if (!c->arch) {
      c->arch = &kNone;
      return reader_fail(p, "model_type", "unknown model_type '%s' (supported: %s)", model_type,
                         import_arch_list(list, sizeof list));
    }
  } else {
    return reader_fail(p, NULL,
                       "missing 'architectures' and 'model_type': cannot tell "
                       "the architecture");
  }

  p->model = c->arch->architecture;
  p->cls = import_config_class_by_name(c->arch->config_class);
  p->top_cls = import_config_class_by_name(c->arch->top_config_class);
  p->obj = p->root;
  if (c->arch->text_config) {
    const json_t *text = json_object_get(p->root, c->arch->text_config);
    if (!json_is_object(text))
      return reader_fail(p, text ? c->arch->text_config : NULL, "%s needs the object '%s'",
                         c->arch->architecture, c->arch->text_config);
    p->obj = (json_t *)text;
    c->scope = c->arch->text_config;
    const char *inner;
    if (!reader_get_str(p, p->obj, "", "model_type", c->arch->model_type, &inner))
      return false;
    if (strcmp(inner, c->arch->model_type))
      return reader_fail(p, "model_type", "key '%s.model_type' must be '%s', got '%s'", c->scope,
                         c->arch->model_type, inner);
  }

  // The checkpoint dtype is informational (the graph's comes from --dtype).
  const char *dtype = NULL;
  c->scope = "";
  bool ok = reader_get_str(p, p->root, "", "torch_dtype", NULL, &dtype) &&
            (dtype || reader_get_str(p, p->root, "", "dtype", NULL, &dtype));
  c->scope = c->arch->text_config ? c->arch->text_config : "";
  if (!ok)
    return false;
  snprintf(c->dtype, sizeof c->dtype, "%s", dtype ? dtype : "");
  return true;
}

//===----------------------------------------------------------------------===//
// Sizes and attention
//===----------------------------------------------------------------------===//

static bool parse_sizes(import_reader *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  // NemotronH's transformers 5 config has no num_hidden_layers: the length
  // of its block list is the number (NemotronHConfig.num_hidden_layers).
  int64_t implied_layers = 0;
  if (c->arch->family == IMPORT_NEMOTRON_H) {
    const json_t *pattern = json_object_get(o, "hybrid_override_pattern");
    const json_t *types = json_object_get(o, "layers_block_type");
    implied_layers = json_is_array(types)      ? (int64_t)json_array_size(types)
                     : json_is_string(pattern) ? (int64_t)json_string_length(pattern)
                                               : 0;
  }
  if (!reader_get_int(p, o, "", "vocab_size", true, 0, 1, &c->vocab) ||
      !reader_get_int(p, o, "", "hidden_size", true, 0, 1, &c->hidden) ||
      !reader_get_int(p, o, "", "intermediate_size", true, 0, 1, &c->intermediate) ||
      !reader_get_int(p, o, "", "num_hidden_layers", implied_layers == 0, implied_layers, 1,
                      &c->layers) ||
      !reader_get_int(p, o, "", "num_attention_heads", true, 0, 1, &c->heads) ||
      !reader_get_int(p, o, "", "num_key_value_heads", false, c->heads, 1, &c->kv_heads))
    return false;
  // Not used by the graph (RoPE takes positions as they come), but a config
  // with no positions at all is broken: checked where written.
  int64_t max_positions;
  if (!reader_get_int(p, o, "", "max_position_embeddings", false, 1, 1, &max_positions))
    return false;
  if (c->layers > kMaxLayers)
    return reader_fail(p, "num_hidden_layers",
                       "num_hidden_layers %lld is more than a compiled step "
                       "takes (limit %lld: one parameter tensor per layer "
                       "at least, %d function arguments in all)",
                       (long long)c->layers, (long long)kMaxLayers, NN_MAX_FUNC_ARGS);
  if (c->heads % c->kv_heads != 0)
    return reader_fail(p, "num_key_value_heads",
                       "num_attention_heads %lld is not a multiple of "
                       "num_key_value_heads %lld",
                       (long long)c->heads, (long long)c->kv_heads);

  // head_dim: explicit (NemotronH's 4.x remote code spells it
  // attention_head_dim; transformers 5 reads head_dim), else the class's
  // default, else implied.
  reader_mark_seen(p, false, "attention_head_dim");
  const char *hd_key = !json_object_get(o, "head_dim") && json_object_get(o, "attention_head_dim")
                           ? "attention_head_dim"
                           : "head_dim";
  if (!reader_get_int(p, o, "", hd_key, false, 0, 1, &c->head_dim))
    return false;
  if (c->head_dim == 0) {
    if (c->hidden % c->heads != 0)
      return reader_fail(p, "num_attention_heads",
                         "num_attention_heads %lld does not divide hidden_size %lld, "
                         "and no head_dim is given",
                         (long long)c->heads, (long long)c->hidden);
    c->head_dim = c->hidden / c->heads;
  }
  if (c->arch->rope && c->head_dim % 2 != 0)
    return reader_fail(p, hd_key, "head_dim %lld must be even for rotary embeddings",
                       (long long)c->head_dim);

  // Composite models may say tie_word_embeddings at the top level; the
  // text config's own value wins.
  bool default_tie = false;
  if (c->arch->text_config)
    reader_mark_seen(p, true, "tie_word_embeddings");
  if (c->arch->text_config && !json_object_get(o, "tie_word_embeddings")) {
    c->scope = "";
    bool ok = reader_get_bool(p, p->root, "", "tie_word_embeddings", false, &default_tie);
    c->scope = c->arch->text_config;
    if (!ok)
      return false;
  }
  if (!reader_get_float(p, o, "", c->arch->eps_key, false, 1e-6, kEps, &c->eps) ||
      !reader_get_float(p, o, "", "initializer_range", false, 0.02, kInitStd,
                        &c->initializer_range) ||
      !reader_get_bool(p, o, "", "tie_word_embeddings", default_tie, &c->tie) ||
      !reader_get_bool(p, o, "", "attention_bias", false, &c->attention_bias) ||
      !reader_get_bool(p, o, "", "mlp_bias", false, &c->mlp_bias) || !get_padding_idx(p, o, c))
    return false;

  const char *act;
  if (!reader_get_str(p, o, "", c->arch->activation_key, c->arch->activation, &act))
    return false;
  if (strcmp(act, c->arch->activation))
    return reader_fail(p, c->arch->activation_key,
                       "%s '%s' is not supported for %s (expected '%s')", c->arch->activation_key,
                       act, c->arch->architecture, c->arch->activation);

  c->attn_scale = 1.0 / sqrt((double)c->head_dim);
  if (c->arch->query_scalar) {
    double q;
    if (!reader_get_float(p, o, "", "query_pre_attn_scalar", false, (double)c->head_dim, kScale,
                          &q))
      return false;
    c->attn_scale = 1.0 / sqrt(q);
  }
  // transformers reads attn_logit_softcapping into Gemma3's attention but
  // never passes it on (5.24, Gemma3Attention.forward; Gemma2 does), and
  // no other family here has it: the step trains as with none, and says so.
  double softcap;
  if (!reader_get_float(p, o, "", "attn_logit_softcapping", false, 0.0, kScale, &softcap))
    return false;
  if (softcap != 0.0)
    warn(p, "attn_logit_softcapping",
         "key 'attn_logit_softcapping' is %g: transformers' %s attention does not apply it, "
         "so the compiled step does not either",
         softcap, c->arch->architecture);
  c->attn_softcap = 0.0;
  double final_softcap;
  if (!reader_get_float(p, o, "", "final_logit_softcapping", false, 0.0, kScale, &final_softcap))
    return false;
  if (final_softcap != 0.0)
    return reader_fail(p, "final_logit_softcapping",
                       "final_logit_softcapping is not supported (the nn dialect has no "
                       "logit soft-capping op)");
  return true;
}

//===----------------------------------------------------------------------===//
// Layer kinds
//===----------------------------------------------------------------------===//

// NemotronH: `hybrid_override_pattern` ("M-*...") or `layers_block_type`.
static bool parse_hybrid_pattern(import_reader *p) {
  import_config *c = p->cfg;
  const json_t *pattern = json_object_get(p->obj, "hybrid_override_pattern");
  const json_t *types = json_object_get(p->obj, "layers_block_type");
  reader_mark_seen(p, false, "hybrid_override_pattern");
  reader_mark_seen(p, false, "layers_block_type");
  // transformers 5 takes layers_block_type when both are written.
  if (json_is_array(types))
    pattern = NULL;
  if (json_is_string(pattern)) {
    const char *s = json_string_value(pattern);
    size_t n = json_string_length(pattern);
    if ((int64_t)n != c->layers)
      return reader_fail(p, "hybrid_override_pattern",
                         "hybrid_override_pattern has %zu blocks but num_hidden_layers "
                         "is %lld",
                         n, (long long)c->layers);
    for (size_t i = 0; i < n; ++i) {
      switch (s[i]) {
      case 'M': c->blocks[i] = IMPORT_BLOCK_MAMBA; break;
      case '*': c->blocks[i] = IMPORT_BLOCK_ATTENTION; break;
      case '-': c->blocks[i] = IMPORT_BLOCK_MLP; break;
      default:
        return reader_fail(p, "hybrid_override_pattern",
                           "hybrid_override_pattern[%zu] is '%c', which is not supported "
                           "(expected 'M' Mamba2, '*' attention or '-' MLP%s)",
                           i, s[i], s[i] == 'E' ? "; 'E' mixture-of-experts blocks are not" : "");
      }
    }
    return true;
  }
  if (json_is_array(types)) {
    if ((int64_t)json_array_size(types) != c->layers)
      return reader_fail(p, "layers_block_type",
                         "layers_block_type has %zu entries but num_hidden_layers is %lld",
                         json_array_size(types), (long long)c->layers);
    // The names of the remote code (4.x: mamba, attention) and of
    // transformers 5's NemotronHConfig (linear_attention, full_attention).
    for (size_t i = 0; i < json_array_size(types); ++i) {
      const char *t = json_string_value(json_array_get(types, i));
      if (t && (!strcmp(t, "mamba") || !strcmp(t, "linear_attention")))
        c->blocks[i] = IMPORT_BLOCK_MAMBA;
      else if (t && (!strcmp(t, "attention") || !strcmp(t, "full_attention")))
        c->blocks[i] = IMPORT_BLOCK_ATTENTION;
      else if (t && !strcmp(t, "mlp"))
        c->blocks[i] = IMPORT_BLOCK_MLP;
      else
        return reader_fail(p, "layers_block_type",
                           "layers_block_type[%zu] is %s%s%s, expected \"mamba\" or "
                           "\"linear_attention\" (Mamba2), \"attention\" or \"full_attention\", "
                           "or \"mlp\"%s",
                           i, t ? "\"" : "", t ? t : "not a string", t ? "\"" : "",
                           t && !strcmp(t, "moe") ? " (mixture-of-experts blocks are not supported)"
                                                  : "");
    }
    return true;
  }
  if (pattern || types)
    return reader_fail(p, pattern ? "hybrid_override_pattern" : "layers_block_type",
                       "key '%s' has the wrong type (a string / an array of strings)",
                       pattern ? "hybrid_override_pattern" : "layers_block_type");
  return reader_fail(p, NULL, "missing required key 'hybrid_override_pattern' (%s)",
                     c->arch->architecture);
}

// Decoders: `layer_types` (5.x), Gemma's sliding_window_pattern, or Qwen's
// use_sliding_window / max_window_layers (4.x).
static bool parse_decoder_layers(import_reader *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  // The keys transformers derives layer_types from when it is absent, and
  // the window a sliding layer would have: considered either way.
  static const char *const kLayerKeys[] = {"layer_types", "sliding_window_pattern",
                                           "use_sliding_window", "max_window_layers",
                                           "sliding_window"};
  for (size_t i = 0; i < sizeof kLayerKeys / sizeof *kLayerKeys; ++i)
    reader_mark_seen(p, false, kLayerKeys[i]);
  const json_t *types = json_object_get(o, "layer_types");
  if (types && !json_is_null(types)) {
    if (!json_is_array(types) || (int64_t)json_array_size(types) != c->layers)
      return reader_fail(p, "layer_types",
                         "layer_types must be an array of num_hidden_layers (%lld) strings",
                         (long long)c->layers);
    for (size_t i = 0; i < json_array_size(types); ++i) {
      const char *t = json_string_value(json_array_get(types, i));
      if (t && !strcmp(t, "full_attention"))
        c->blocks[i] = IMPORT_BLOCK_FULL;
      else if (t && !strcmp(t, "sliding_attention"))
        c->blocks[i] = IMPORT_BLOCK_SLIDING;
      else
        return reader_fail(p, "layer_types",
                           "layer_types[%zu] must be \"full_attention\" or "
                           "\"sliding_attention\"",
                           i);
    }
  } else if (c->arch->local_rope) {
    int64_t pattern;
    if (!reader_get_int(p, o, "", "sliding_window_pattern", false, 6, 1, &pattern))
      return false;
    for (int64_t i = 0; i < c->layers; ++i)
      c->blocks[i] = (i + 1) % pattern == 0 ? IMPORT_BLOCK_FULL : IMPORT_BLOCK_SLIDING;
  } else {
    bool sliding;
    int64_t first;
    if (!reader_get_bool(p, o, "", "use_sliding_window", false, &sliding) ||
        !reader_get_int(p, o, "", "max_window_layers", false, c->layers, 0, &first))
      return false;
    // Qwen2Config: sliding_window None (null) disables the window.
    if (json_is_null(json_object_get(o, "sliding_window")))
      sliding = false;
    for (int64_t i = 0; i < c->layers; ++i)
      c->blocks[i] = sliding && i >= first ? IMPORT_BLOCK_SLIDING : IMPORT_BLOCK_FULL;
  }
  if (import_config_count_blocks(c, IMPORT_BLOCK_SLIDING) > 0) {
    if (!reader_get_int(p, o, "", "sliding_window", true, 0, 1, &c->sliding_window))
      return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//


// A RoPE object with neither rope_type nor type is default RoPE, as
// transformers reads it; its other keys (a "factor" meant for linear or
// llama3 scaling) change nothing: one warning naming them, in transformers'
// words, and that they are ignored.
static void warn_untyped_rope(import_reader *p, const json_t *o, const char *opath) {
  if (json_object_get(o, "rope_type") || json_object_get(o, "type"))
    return;
  char keys[200] = "";
  size_t n = 0;
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)o, key, v) {
    if (!strcmp(key, "rope_theta"))
      continue;
    int w = snprintf(keys + n, sizeof keys - n, "%s'%s'", n ? ", " : "", key);
    if (w < 0 || (size_t)w >= sizeof keys - n)
      break;
    n += (size_t)w;
  }
  if (n)
    warn(p, opath,
         "Unrecognized keys in '%s' for 'rope_type'='default': {%s}: '%s' names no "
         "rope_type (or type), so it is default RoPE and these keys are ignored (a factor "
         "is not applied); give \"rope_type\": \"linear\" or \"llama3\" to scale",
         opath, keys, opath);
}

// One RoPE description in object `o` (at `opath`): rope_theta (default
// `theta`), rope_type or the legacy `type`, and llama3's factors.
static bool parse_rope_spec(import_reader *p, const json_t *o, const char *opath, double theta,
                            import_rope *r) {
  const char *type;
  if (!reader_get_float(p, o, opath, "rope_theta", false, theta, kRopeBase, &r->theta) ||
      !reader_get_str(p, o, opath, "rope_type", NULL, &type) ||
      (!type && !reader_get_str(p, o, opath, "type", "default", &type)))
    return false;
  char where[160];
  snprintf(where, sizeof where, "%s%s%s", opath, opath[0] ? "." : "", "rope_type");
  if (!strcmp(type, "default")) {
    warn_untyped_rope(p, o, opath);
    snprintf(r->type, sizeof r->type, "default");
    return true;
  }
  if (!strcmp(type, "linear")) { // positions divided by factor (Gemma 3 4B and up)
    snprintf(r->type, sizeof r->type, "linear");
    return reader_get_float(p, o, opath, "factor", true, 0, kRopeFactor, &r->factor);
  }
  if (strcmp(type, "llama3"))
    return reader_fail(p, where,
                       "rope_type '%s' is not supported (supported: default, "
                       "llama3, linear)",
                       type);
  snprintf(r->type, sizeof r->type, "llama3");
  if (!reader_get_float(p, o, opath, "factor", true, 0, kRopeFactor, &r->factor) ||
      !reader_get_float(p, o, opath, "low_freq_factor", true, 0, kRopeFactor,
                        &r->low_freq_factor) ||
      !reader_get_float(p, o, opath, "high_freq_factor", true, 0, kRopeFactor,
                        &r->high_freq_factor) ||
      !reader_get_int(p, o, opath, "original_max_position_embeddings", true, 0, 1,
                      &r->original_max_position_embeddings))
    return false;
  if (!(r->low_freq_factor < r->high_freq_factor))
    return reader_fail(p, where, "llama3 low_freq_factor %g must be below high_freq_factor %g",
                       r->low_freq_factor, r->high_freq_factor);
  return true;
}

// A number default of the text config's class, not recorded as used (for
// the bases of rope_parameters entries, which transformers 5 always writes).
static double peek_default(const import_reader *p, const char *key, double fallback) {
  const char *text = import_config_class_default(p->cls, key);
  return text ? strtod(text, NULL) : fallback;
}

static bool parse_rope(import_reader *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  reader_mark_seen(p, false, "rope_theta");
  reader_mark_seen(p, false, "rope_local_base_freq");
  reader_mark_seen(p, false, "rope_scaling");
  double base = json_object_get(o, "rope_theta") ? 0 : peek_default(p, "rope_theta", 1e4);
  double local = peek_default(p, "rope_local_base_freq", 1e4);
  const json_t *params;
  if (!reader_get_obj(p, o, "", "rope_parameters", &params))
    return false;
  if (!params) { // transformers 4.x: the bases are keys of their own
    if (!reader_get_float(p, o, "", "rope_theta", false, base, kRopeBase, &base) ||
        (c->arch->local_rope &&
         !reader_get_float(p, o, "", "rope_local_base_freq", false, local, kRopeBase, &local)))
      return false;
  } else if (json_object_get(o, "rope_theta") &&
             !reader_get_float(p, o, "", "rope_theta", false, base, kRopeBase, &base)) {
    return false;
  }
  c->rope = (import_rope){.theta = base, .type = "default"};
  c->rope_local = (import_rope){.theta = local, .type = "default"};
  if (params) { // transformers 5.x
    const json_t *full = json_object_get(params, "full_attention");
    const json_t *sliding = json_object_get(params, "sliding_attention");
    if (!full && !sliding)
      return parse_rope_spec(p, params, "rope_parameters", base, &c->rope);
    if (full && (!json_is_object(full) ||
                 !parse_rope_spec(p, full, "rope_parameters.full_attention", base,
                                  &c->rope)))
      return json_is_object(full)
                 ? false
                 : reader_fail(p, "rope_parameters.full_attention",
                               "key 'rope_parameters.full_attention' must be an object");
    if (sliding && (!json_is_object(sliding) ||
                    !parse_rope_spec(p, sliding, "rope_parameters.sliding_attention",
                                     c->rope_local.theta, &c->rope_local)))
      return json_is_object(sliding)
                 ? false
                 : reader_fail(p, "rope_parameters.sliding_attention",
                               "key 'rope_parameters.sliding_attention' must be an object");
    return true;
  }
  // transformers 4.x
  const json_t *scaling;
  if (!reader_get_obj(p, o, "", "rope_scaling", &scaling))
    return false;
  return !scaling ||
         parse_rope_spec(p, scaling, "rope_scaling", c->rope.theta, &c->rope);
}

//===----------------------------------------------------------------------===//
// NemotronH Mamba2
//===----------------------------------------------------------------------===//

// The key NemotronHConfig reads for `canonical`: its alias when written
// (__post_init__ pops mamba_n_groups, mamba_d_conv, ... over the field).
static const char *aliased(import_reader *p, const char *canonical, const char *alias) {
  reader_mark_seen(p, false, canonical);
  reader_mark_seen(p, false, alias);
  return json_object_get(p->obj, alias) ? alias : canonical;
}

static bool parse_mamba(import_reader *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  bool conv_bias, proj_bias;
  const char *act;
  if (!reader_get_int(p, o, "", "mamba_num_heads", true, 0, 1, &c->mamba_heads) ||
      !reader_get_int(p, o, "", "mamba_head_dim", true, 0, 1, &c->mamba_head_dim) ||
      !reader_get_int(p, o, "", aliased(p, "n_groups", "mamba_n_groups"), true, 0, 1,
                      &c->n_groups) ||
      !reader_get_int(p, o, "", "ssm_state_size", true, 0, 1, &c->ssm_state) ||
      !reader_get_int(p, o, "", aliased(p, "conv_kernel", "mamba_d_conv"), true, 0, 1,
                      &c->conv_kernel) ||
      !reader_get_int(p, o, "", aliased(p, "chunk_size", "mamba_chunk_size"), false, 128, 1,
                      &c->chunk_size) ||
      !reader_get_bool(p, o, "", aliased(p, "use_conv_bias", "mamba_conv_bias"), true,
                       &conv_bias) ||
      !reader_get_bool(p, o, "", "use_bias", false, &proj_bias) ||
      !reader_get_str(p, o, "", "mamba_hidden_act", "silu", &act) ||
      !reader_get_float(p, o, "", aliased(p, "time_step_min", "mamba_dt_min"), false, 0.001,
                        (reader_range){-1, 1e6}, &c->mamba_dt_min))
    return false;
  c->mamba_eps = c->eps;
  if (c->mamba_dt_min < 0)
    return reader_fail(p, "time_step_min", "time_step_min %g must be >= 0 (dt's lower clamp)",
                       c->mamba_dt_min);
  if (c->mamba_heads % c->n_groups != 0)
    return reader_fail(p, "n_groups", "mamba_num_heads %lld is not a multiple of n_groups %lld",
                       (long long)c->mamba_heads, (long long)c->n_groups);
  if (!conv_bias)
    return reader_fail(p, "use_conv_bias",
                       "use_conv_bias false is not supported (nn.mamba2_mixer takes a "
                       "conv1d bias)");
  if (proj_bias)
    return reader_fail(p, "use_bias",
                       "use_bias true (in_proj/out_proj biases) is not "
                       "supported by nn.mamba2_mixer");
  if (strcmp(act, "silu"))
    return reader_fail(p, "mamba_hidden_act",
                       "mamba_hidden_act '%s' is not supported (expected 'silu')", act);
  return true;
}

//===----------------------------------------------------------------------===//
// Keys the step ignores
//===----------------------------------------------------------------------===//

static void warn(import_reader *p, const char *key, const char *fmt, ...) {
  int line = 1, col = 1;
  import_config_locate(p->cfg, key, &line, &col);
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  reader_append_line(&p->cfg->warnings, "%s:%d:%d: warning: %s", p->cfg->path, line, col, msg);
}

// Dropout: transformers applies it in training; the compiled step has none.
static void check_dropout(import_reader *p, const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  if (json_is_number(v) && json_number_value(v) != 0.0)
    warn(p, key, "key '%s' is %g: the compiled step has no dropout, it trains as with 0",
         key, json_number_value(v));
}

// Every key of the text config (and of a composite's top level) that was
// not read and is not inert for its class: a warning each.
static void report_ignored(import_reader *p) {
  const char *key;
  json_t *v;
  check_dropout(p, p->obj, "attention_dropout");
  check_dropout(p, p->obj, "hidden_dropout");
  json_object_foreach(p->obj, key, v) {
    char k[200];
    snprintf(k, sizeof k, "%s", key);
    if (!json_object_get(p->seen, k) && !import_config_class_inert(p->cls, key))
      warn(p, key, "key '%s%s%s' is not used by shard-import: the compiled step ignores "
           "it (%s)", p->cfg->scope, p->cfg->scope[0] ? "." : "", key,
           p->cls ? p->cls->name : "?");
  }
  if (p->obj == p->root)
    return;
  const char *scope = p->cfg->scope;
  p->cfg->scope = "";
  json_object_foreach(p->root, key, v) {
    char k[200];
    snprintf(k, sizeof k, "^%s", key);
    if (!json_object_get(p->seen, k) && !import_config_class_inert(p->top_cls, key))
      warn(p, key, "key '%s' is not used by shard-import: the compiled step ignores "
           "it (%s)", key, p->top_cls ? p->top_cls->name : "?");
  }
  p->cfg->scope = scope;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

bool import_config_parse(const char *path, const char *text, size_t len,
                         import_config *cfg, char *err, size_t errlen) {
  *cfg = (import_config){.scope = ""};
  cfg->path = strdup(path);
  cfg->text = malloc(len + 1);
  if (!cfg->path || !cfg->text) {
    snprintf(err, errlen, "%s: error: out of memory", path);
    import_config_free(cfg);
    return false;
  }
  memcpy(cfg->text, text, len);
  cfg->text[len] = '\0';
  cfg->text_len = len;

  import_reader p = {.cfg = cfg,
                     .path = cfg->path,
                     .text = cfg->text,
                     .text_len = len,
                     .scope = &cfg->scope,
                     .model = "unknown architecture",
                     .defaults_used = &cfg->defaults_used,
                     .err = err,
                     .errlen = errlen,
                     .seen = json_object(),
                     .defaults = json_array()};
  json_error_t jerr;
  p.root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  bool ok = false;
  if (!p.root) {
    snprintf(err, errlen, "%s:%d:%d: error: malformed JSON: %s", path, jerr.line,
             jerr.column, jerr.text);
  } else if (!json_is_object(p.root)) {
    reader_fail(&p, NULL, "the config must be a JSON object, got %s", reader_type_name(p.root));
  } else if (parse_arch(&p) && parse_sizes(&p)) {
    cfg->blocks = calloc((size_t)cfg->layers, sizeof *cfg->blocks);
    if (!cfg->blocks)
      reader_fail(&p, "num_hidden_layers", "out of memory for %lld layers", (long long)cfg->layers);
    else if (cfg->arch->family == IMPORT_NEMOTRON_H)
      ok = parse_hybrid_pattern(&p) && parse_mamba(&p);
    else
      ok = parse_decoder_layers(&p) && (!cfg->arch->rope || parse_rope(&p));
    if (ok)
      report_ignored(&p);
  }
  json_decref(p.root);
  json_decref(p.seen);
  json_decref(p.defaults);
  if (!ok)
    import_config_free(cfg);
  return ok;
}

bool import_config_load(const char *path, import_config *cfg, char *err,
                        size_t errlen) {
  size_t len = 0;
  char why[1024];
  // A Hugging Face config.json is a few KiB; 16 MiB bounds a wrong file.
  char *text = tool_read_file(path, (size_t)16 << 20, &len, why, sizeof why);
  if (!text) {
    *cfg = (import_config){.scope = ""};
    snprintf(err, errlen, "%s: error: %s", path, why);
    return false;
  }
  bool ok = import_config_parse(path, text, len, cfg, err, errlen);
  free(text);
  return ok;
}

void import_config_free(import_config *cfg) {
  free(cfg->path);
  free(cfg->text);
  free(cfg->blocks);
  free(cfg->defaults_used);
  free(cfg->warnings);
  *cfg = (import_config){.scope = ""};
}

bool import_config_locate(const import_config *cfg, const char *key, int *line,
                          int *col) {
  return reader_locate(cfg->text, cfg->text_len, cfg->scope, key, line, col);
}

int64_t import_config_count_blocks(const import_config *cfg, import_block kind) {
  int64_t n = 0;
  for (int64_t i = 0; i < cfg->layers; ++i)
    n += cfg->blocks[i] == kind;
  return n;
}
