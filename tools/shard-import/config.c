// Parsing config.json with jansson: architecture detection, typed key
// lookups with defaults, both transformers spellings (4.x rope_theta /
// rope_scaling / torch_dtype, 5.x rope_parameters / layer_types / dtype),
// and the consistency checks that make impossible models an error here
// rather than a broken graph later.
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_locate.h"
#include "source.h"

typedef struct parser {
  import_config *cfg;
  json_t *root; // the whole file
  json_t *obj;  // the text config object (root, or root[text_config])
  char *err;
  size_t errlen;
} parser;

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

// `scope.key`, or `key` at the top level.
static const char *qualify(const parser *p, const char *key, char *buf,
                           size_t len) {
  if (p->cfg->scope[0])
    snprintf(buf, len, "%s.%s", p->cfg->scope, key);
  else
    snprintf(buf, len, "%s", key);
  return buf;
}

// Writes `PATH:LINE:COL: error: MESSAGE` (the position of `key` below the
// scope, when written; `PATH: error:` otherwise) and returns false.
__attribute__((format(printf, 3, 4))) static bool fail(parser *p, const char *key,
                                                        const char *fmt, ...) {
  int line, col;
  int n;
  if (key && import_config_locate(p->cfg, key, &line, &col))
    n = snprintf(p->err, p->errlen, "%s:%d:%d: error: ", p->cfg->path, line, col);
  else
    n = snprintf(p->err, p->errlen, "%s: error: ", p->cfg->path);
  if (n < 0 || (size_t)n >= p->errlen)
    return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return false;
}

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE: return "true";
  case JSON_FALSE: return "false";
  case JSON_NULL: return "null";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Typed lookups. `o` is an object at dotted path `opath` below the scope
// ("" for the text config itself); `key` is looked up in it. A JSON null
// counts as absent. Optional keys take `def` when absent.
//===----------------------------------------------------------------------===//

typedef struct key_ref {
  const json_t *o;
  const char *opath;
  const char *key;
  char rel[160];  // path below the scope, for locating
  char full[200]; // path from the top, for messages
} key_ref;

static const json_t *lookup(parser *p, key_ref *k, const json_t *o,
                            const char *opath, const char *key) {
  k->o = o;
  k->opath = opath;
  k->key = key;
  if (opath[0])
    snprintf(k->rel, sizeof k->rel, "%s.%s", opath, key);
  else
    snprintf(k->rel, sizeof k->rel, "%s", key);
  qualify(p, k->rel, k->full, sizeof k->full);
  const json_t *v = json_object_get(o, key);
  return json_is_null(v) ? NULL : v;
}

// Sizes above this are rejected before they can overflow products of sizes
// (vocab x hidden, heads x head_dim) in 64 bits.
// 2^24: beyond every real model dimension (vocabularies of ~262k, hidden
// sizes of ~16k), and small enough that shapes multiply without overflow.
static const int64_t kMaxSize = INT64_C(1) << 24;

// Layers beyond this are rejected: the graph would be built op by op.
static const int64_t kMaxLayers = 100000;

static bool get_int(parser *p, const json_t *o, const char *opath,
                    const char *key, bool required, int64_t def, int64_t min,
                    int64_t *out) {
  key_ref k;
  const json_t *v = lookup(p, &k, o, opath, key);
  if (!v) {
    if (required)
      return fail(p, NULL, "missing required key '%s' (%s)", k.full,
                  p->cfg->arch->architecture);
    *out = def;
    return true;
  }
  if (!json_is_integer(v))
    return fail(p, k.rel, "key '%s' must be an integer, got %s", k.full,
                type_name(v));
  json_int_t x = json_integer_value(v);
  if (x > kMaxSize)
    return fail(p, k.rel, "key '%s' is %lld, beyond any real model (limit %lld)",
                k.full, (long long)x, (long long)kMaxSize);
  if (x < min)
    return fail(p, k.rel, "key '%s' must be %s, got %lld", k.full,
                min == 1 ? "positive" : min == 0 ? "non-negative" : "larger",
                (long long)x);
  *out = (int64_t)x;
  return true;
}

// pad_token_id, the embedding's padding_idx where transformers makes it one
// (arch->padding_idx): absent, the config class's default; null, none; a
// negative id counts from the end (torch's padding_idx); outside [-vocab,
// vocab) refused, as torch's nn.Embedding refuses it.
static bool get_padding_idx(parser *p, const json_t *o, import_config *c) {
  c->padding_idx = -1;
  if (!c->arch->padding_idx)
    return true;
  const json_t *raw = json_object_get(o, "pad_token_id");
  if (raw && json_is_null(raw))
    return true;
  key_ref k;
  const json_t *v = lookup(p, &k, o, "", "pad_token_id");
  if (!v) {
    c->padding_idx = c->arch->default_pad < c->vocab ? c->arch->default_pad : -1;
    return true;
  }
  if (!json_is_integer(v))
    return fail(p, k.rel, "key '%s' must be an integer or null, got %s", k.full,
                type_name(v));
  json_int_t id = json_integer_value(v);
  if (id < -c->vocab || id >= c->vocab)
    return fail(p, k.rel,
                "key '%s' is %lld, outside the vocabulary [-%lld, %lld) (it is the "
                "embedding's padding_idx)",
                k.full, (long long)id, (long long)c->vocab, (long long)c->vocab);
  c->padding_idx = id < 0 ? c->vocab + id : id;
  return true;
}

// The range a number of the config is meaningful in: (lo, hi] — a value
// that imports but then trains to NaN (rope_theta 1e-308, eps 1e308) is
// refused here, naming the key.
typedef struct range {
  double lo, hi; // lo excluded, hi included
} range;

static const range kEps = {0, 1};                // rms_norm_eps, layer_norm_epsilon
static const range kInitStd = {1e-8, 1};         // initializer_range
static const range kRopeBase = {1, 1e12};        // rope_theta, rope_local_base_freq
static const range kScale = {0, 1e6};            // query_pre_attn_scalar, softcaps
static const range kRopeFactor = {0, 1e4};       // llama3 factor and frequency factors

static bool get_float(parser *p, const json_t *o, const char *opath,
                      const char *key, bool required, double def, range rg,
                      double *out) {
  key_ref k;
  const json_t *v = lookup(p, &k, o, opath, key);
  if (!v) {
    if (required)
      return fail(p, NULL, "missing required key '%s' (%s)", k.full,
                  p->cfg->arch->architecture);
    *out = def;
    return true;
  }
  if (!json_is_number(v))
    return fail(p, k.rel, "key '%s' must be a number, got %s", k.full,
                type_name(v));
  double x = json_number_value(v);
  if (!(x > rg.lo && x <= rg.hi))
    return fail(p, k.rel, "key '%s' is %g: it must be in (%g, %g]", k.full, x, rg.lo, rg.hi);
  *out = x;
  return true;
}

static bool get_bool(parser *p, const json_t *o, const char *opath,
                     const char *key, bool def, bool *out) {
  key_ref k;
  const json_t *v = lookup(p, &k, o, opath, key);
  if (!v) {
    *out = def;
    return true;
  }
  if (!json_is_boolean(v))
    return fail(p, k.rel, "key '%s' must be true or false, got %s", k.full,
                type_name(v));
  *out = json_is_true(v);
  return true;
}

// A string; *out = def (which may be NULL) when absent.
static bool get_str(parser *p, const json_t *o, const char *opath,
                    const char *key, const char *def, const char **out) {
  key_ref k;
  const json_t *v = lookup(p, &k, o, opath, key);
  if (!v) {
    *out = def;
    return true;
  }
  if (!json_is_string(v))
    return fail(p, k.rel, "key '%s' must be a string, got %s", k.full,
                type_name(v));
  *out = json_string_value(v);
  return true;
}

// An object or absent/null (*out = NULL).
static bool get_obj(parser *p, const json_t *o, const char *opath,
                    const char *key, const json_t **out) {
  key_ref k;
  const json_t *v = lookup(p, &k, o, opath, key);
  if (v && !json_is_object(v))
    return fail(p, k.rel, "key '%s' must be an object, got %s", k.full,
                type_name(v));
  *out = v;
  return true;
}

//===----------------------------------------------------------------------===//
// Architecture
//===----------------------------------------------------------------------===//

// Finds the architecture from `architectures` (first entry) or `model_type`.
static bool parse_arch(parser *p) {
  static const import_arch kNone = {.architecture = "unknown architecture"};
  import_config *c = p->cfg;
  c->arch = &kNone;
  char list[512];
  const json_t *archs = json_object_get(p->root, "architectures");
  const json_t *type = json_object_get(p->root, "model_type");
  if (type && !json_is_string(type) && !json_is_null(type))
    return fail(p, "model_type", "key 'model_type' must be a string, got %s",
                type_name(type));
  const char *model_type = json_is_string(type) ? json_string_value(type) : NULL;
  if (archs && !json_is_null(archs)) {
    if (!json_is_array(archs) || json_array_size(archs) == 0 ||
        !json_is_string(json_array_get(archs, 0)))
      return fail(p, "architectures",
                  "key 'architectures' must be a non-empty array of strings");
    const char *name = json_string_value(json_array_get(archs, 0));
    c->arch = import_arch_by_name(name);
    if (!c->arch) {
      c->arch = &kNone;
      return fail(p, "architectures", "unknown architecture '%s' (supported: %s)",
                  name, import_arch_list(list, sizeof list));
    }
    const char *want = c->arch->top_model_type ? c->arch->top_model_type
                                               : c->arch->model_type;
    if (model_type && strcmp(model_type, want))
      return fail(p, "model_type",
                  "architecture '%s' has model_type '%s', but the config says '%s'",
                  name, want, model_type);
  } else if (model_type) {
    c->arch = import_arch_by_model_type(model_type);
    if (!c->arch) {
      c->arch = &kNone;
      return fail(p, "model_type", "unknown model_type '%s' (supported: %s)",
                  model_type, import_arch_list(list, sizeof list));
    }
  } else {
    return fail(p, NULL, "missing 'architectures' and 'model_type': cannot tell "
                         "the architecture");
  }

  p->obj = p->root;
  if (c->arch->text_config) {
    const json_t *text = json_object_get(p->root, c->arch->text_config);
    if (!json_is_object(text))
      return fail(p, text ? c->arch->text_config : NULL,
                  "%s needs the object '%s'", c->arch->architecture,
                  c->arch->text_config);
    p->obj = (json_t *)text;
    c->scope = c->arch->text_config;
    const char *inner;
    if (!get_str(p, p->obj, "", "model_type", c->arch->model_type, &inner))
      return false;
    if (strcmp(inner, c->arch->model_type))
      return fail(p, "model_type", "key '%s.model_type' must be '%s', got '%s'",
                  c->scope, c->arch->model_type, inner);
  }

  // The checkpoint dtype is informational (the graph's comes from --dtype).
  const char *dtype = NULL;
  c->scope = "";
  bool ok = get_str(p, p->root, "", "torch_dtype", NULL, &dtype) &&
            (dtype || get_str(p, p->root, "", "dtype", NULL, &dtype));
  c->scope = c->arch->text_config ? c->arch->text_config : "";
  if (!ok)
    return false;
  snprintf(c->dtype, sizeof c->dtype, "%s", dtype ? dtype : "");
  return true;
}

//===----------------------------------------------------------------------===//
// Sizes and attention
//===----------------------------------------------------------------------===//

static bool parse_sizes(parser *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  if (!get_int(p, o, "", "vocab_size", true, 0, 1, &c->vocab) ||
      !get_int(p, o, "", "hidden_size", true, 0, 1, &c->hidden) ||
      !get_int(p, o, "", "intermediate_size", true, 0, 1, &c->intermediate) ||
      !get_int(p, o, "", "num_hidden_layers", true, 0, 1, &c->layers) ||
      !get_int(p, o, "", "num_attention_heads", true, 0, 1, &c->heads) ||
      !get_int(p, o, "", "num_key_value_heads", false, c->heads, 1, &c->kv_heads))
    return false;
  // Not used by the graph (RoPE takes positions as they come), but a config
  // with no positions at all is broken: checked where written.
  int64_t max_positions;
  if (!get_int(p, o, "", "max_position_embeddings", false, 1, 1, &max_positions))
    return false;
  if (c->layers > kMaxLayers)
    return fail(p, "num_hidden_layers", "num_hidden_layers %lld is beyond any real "
                                        "model (limit %lld)",
                (long long)c->layers, (long long)kMaxLayers);
  if (c->heads % c->kv_heads != 0)
    return fail(p, "num_key_value_heads",
                "num_attention_heads %lld is not a multiple of "
                "num_key_value_heads %lld",
                (long long)c->heads, (long long)c->kv_heads);

  // head_dim: explicit (NemotronH spells it attention_head_dim), else implied.
  const char *hd_key =
      json_object_get(o, "attention_head_dim") ? "attention_head_dim" : "head_dim";
  if (!get_int(p, o, "", hd_key, false, 0, 1, &c->head_dim))
    return false;
  if (c->head_dim == 0) {
    if (c->hidden % c->heads != 0)
      return fail(p, "num_attention_heads",
                  "num_attention_heads %lld does not divide hidden_size %lld, "
                  "and no head_dim is given",
                  (long long)c->heads, (long long)c->hidden);
    c->head_dim = c->hidden / c->heads;
  }
  if (c->arch->rope && c->head_dim % 2 != 0)
    return fail(p, hd_key, "head_dim %lld must be even for rotary embeddings",
                (long long)c->head_dim);

  // Composite models may say tie_word_embeddings at the top level; the
  // text config's own value wins.
  bool default_tie = c->arch->default_tie;
  if (c->arch->text_config) {
    c->scope = "";
    bool ok = get_bool(p, p->root, "", "tie_word_embeddings", default_tie,
                       &default_tie);
    c->scope = c->arch->text_config;
    if (!ok)
      return false;
  }
  if (!get_float(p, o, "", c->arch->eps_key, false, 1e-6, kEps, &c->eps) ||
      !get_float(p, o, "", "initializer_range", false, 0.02, kInitStd, &c->initializer_range) ||
      !get_bool(p, o, "", "tie_word_embeddings", default_tie, &c->tie) ||
      !get_bool(p, o, "", "attention_bias", false, &c->attention_bias) ||
      !get_bool(p, o, "", "mlp_bias", false, &c->mlp_bias) || !get_padding_idx(p, o, c))
    return false;

  const char *act;
  if (!get_str(p, o, "", c->arch->activation_key, c->arch->activation, &act))
    return false;
  if (strcmp(act, c->arch->activation))
    return fail(p, c->arch->activation_key,
                "%s '%s' is not supported for %s (expected '%s')",
                c->arch->activation_key, act, c->arch->architecture,
                c->arch->activation);

  c->attn_scale = 1.0 / sqrt((double)c->head_dim);
  if (c->arch->query_scalar) {
    double q;
    if (!get_float(p, o, "", "query_pre_attn_scalar", false,
                   (double)c->head_dim, kScale, &q))
      return false;
    c->attn_scale = 1.0 / sqrt(q);
  }
  if (!get_float(p, o, "", "attn_logit_softcapping", false, 0.0, kScale,
                 &c->attn_softcap))
    return false;
  double final_softcap;
  if (!get_float(p, o, "", "final_logit_softcapping", false, 0.0, kScale,
                 &final_softcap))
    return false;
  if (final_softcap != 0.0)
    return fail(p, "final_logit_softcapping",
                "final_logit_softcapping is not supported (the nn dialect has no "
                "logit soft-capping op)");
  return true;
}

//===----------------------------------------------------------------------===//
// Layer kinds
//===----------------------------------------------------------------------===//

// NemotronH: `hybrid_override_pattern` ("M-*...") or `layers_block_type`.
static bool parse_hybrid_pattern(parser *p) {
  import_config *c = p->cfg;
  const json_t *pattern = json_object_get(p->obj, "hybrid_override_pattern");
  const json_t *types = json_object_get(p->obj, "layers_block_type");
  if (json_is_string(pattern)) {
    const char *s = json_string_value(pattern);
    size_t n = json_string_length(pattern);
    if ((int64_t)n != c->layers)
      return fail(p, "hybrid_override_pattern",
                  "hybrid_override_pattern has %zu blocks but num_hidden_layers "
                  "is %lld",
                  n, (long long)c->layers);
    for (size_t i = 0; i < n; ++i) {
      switch (s[i]) {
      case 'M': c->blocks[i] = IMPORT_BLOCK_MAMBA; break;
      case '*': c->blocks[i] = IMPORT_BLOCK_ATTENTION; break;
      case '-': c->blocks[i] = IMPORT_BLOCK_MLP; break;
      default:
        return fail(p, "hybrid_override_pattern",
                    "hybrid_override_pattern[%zu] is '%c', which is not supported "
                    "(expected 'M' Mamba2, '*' attention or '-' MLP)",
                    i, s[i]);
      }
    }
    return true;
  }
  if (json_is_array(types)) {
    if ((int64_t)json_array_size(types) != c->layers)
      return fail(p, "layers_block_type",
                  "layers_block_type has %zu entries but num_hidden_layers is %lld",
                  json_array_size(types), (long long)c->layers);
    for (size_t i = 0; i < json_array_size(types); ++i) {
      const char *t = json_string_value(json_array_get(types, i));
      if (t && !strcmp(t, "mamba"))
        c->blocks[i] = IMPORT_BLOCK_MAMBA;
      else if (t && !strcmp(t, "attention"))
        c->blocks[i] = IMPORT_BLOCK_ATTENTION;
      else if (t && !strcmp(t, "mlp"))
        c->blocks[i] = IMPORT_BLOCK_MLP;
      else
        return fail(p, "layers_block_type",
                    "layers_block_type[%zu] is %s%s%s, expected \"mamba\", "
                    "\"attention\" or \"mlp\"",
                    i, t ? "\"" : "", t ? t : "not a string", t ? "\"" : "");
    }
    return true;
  }
  if (pattern || types)
    return fail(p, pattern ? "hybrid_override_pattern" : "layers_block_type",
                "key '%s' has the wrong type (a string / an array of strings)",
                pattern ? "hybrid_override_pattern" : "layers_block_type");
  return fail(p, NULL, "missing required key 'hybrid_override_pattern' (%s)",
              c->arch->architecture);
}

// Decoders: `layer_types` (5.x), Gemma's sliding_window_pattern, or Qwen's
// use_sliding_window / max_window_layers (4.x).
static bool parse_decoder_layers(parser *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  const json_t *types = json_object_get(o, "layer_types");
  if (types && !json_is_null(types)) {
    if (!json_is_array(types) || (int64_t)json_array_size(types) != c->layers)
      return fail(p, "layer_types",
                  "layer_types must be an array of num_hidden_layers (%lld) strings",
                  (long long)c->layers);
    for (size_t i = 0; i < json_array_size(types); ++i) {
      const char *t = json_string_value(json_array_get(types, i));
      if (t && !strcmp(t, "full_attention"))
        c->blocks[i] = IMPORT_BLOCK_FULL;
      else if (t && !strcmp(t, "sliding_attention"))
        c->blocks[i] = IMPORT_BLOCK_SLIDING;
      else
        return fail(p, "layer_types",
                    "layer_types[%zu] must be \"full_attention\" or "
                    "\"sliding_attention\"",
                    i);
    }
  } else if (c->arch->local_rope) {
    int64_t pattern;
    if (!get_int(p, o, "", "sliding_window_pattern", false, 6, 1, &pattern))
      return false;
    for (int64_t i = 0; i < c->layers; ++i)
      c->blocks[i] = (i + 1) % pattern == 0 ? IMPORT_BLOCK_FULL : IMPORT_BLOCK_SLIDING;
  } else {
    bool sliding;
    int64_t first;
    if (!get_bool(p, o, "", "use_sliding_window", false, &sliding) ||
        !get_int(p, o, "", "max_window_layers", false, c->layers, 0, &first))
      return false;
    for (int64_t i = 0; i < c->layers; ++i)
      c->blocks[i] = sliding && i >= first ? IMPORT_BLOCK_SLIDING : IMPORT_BLOCK_FULL;
  }
  if (import_config_count_blocks(c, IMPORT_BLOCK_SLIDING) > 0) {
    if (!get_int(p, o, "", "sliding_window", true, 0, 1, &c->sliding_window))
      return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

// One RoPE description in object `o` (at `opath`): rope_theta (default
// `theta`), rope_type or the legacy `type`, and llama3's factors.
static bool parse_rope_spec(parser *p, const json_t *o, const char *opath,
                            double theta, import_rope *r) {
  const char *type;
  if (!get_float(p, o, opath, "rope_theta", false, theta, kRopeBase, &r->theta) ||
      !get_str(p, o, opath, "rope_type", NULL, &type) ||
      (!type && !get_str(p, o, opath, "type", "default", &type)))
    return false;
  char where[160];
  snprintf(where, sizeof where, "%s%s%s", opath, opath[0] ? "." : "", "rope_type");
  if (!strcmp(type, "default")) {
    snprintf(r->type, sizeof r->type, "default");
    return true;
  }
  if (strcmp(type, "llama3"))
    return fail(p, where, "rope_type '%s' is not supported (supported: default, "
                          "llama3)",
                type);
  snprintf(r->type, sizeof r->type, "llama3");
  if (!get_float(p, o, opath, "factor", true, 0, kRopeFactor, &r->factor) ||
      !get_float(p, o, opath, "low_freq_factor", true, 0, kRopeFactor, &r->low_freq_factor) ||
      !get_float(p, o, opath, "high_freq_factor", true, 0, kRopeFactor,
                 &r->high_freq_factor) ||
      !get_int(p, o, opath, "original_max_position_embeddings", true, 0, 1,
               &r->original_max_position_embeddings))
    return false;
  if (!(r->low_freq_factor < r->high_freq_factor))
    return fail(p, where, "llama3 low_freq_factor %g must be below high_freq_factor %g",
                r->low_freq_factor, r->high_freq_factor);
  return true;
}

static bool parse_rope(parser *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  double base = c->arch->default_rope_theta;
  c->rope = (import_rope){.theta = base, .type = "default"};
  c->rope_local = (import_rope){.theta = 10000.0, .type = "default"};
  if (c->arch->local_rope &&
      !get_float(p, o, "", "rope_local_base_freq", false, 10000.0, kRopeBase,
                 &c->rope_local.theta))
    return false;

  const json_t *params;
  if (!get_obj(p, o, "", "rope_parameters", &params))
    return false;
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
                 : fail(p, "rope_parameters.full_attention",
                        "key 'rope_parameters.full_attention' must be an object");
    if (sliding && (!json_is_object(sliding) ||
                    !parse_rope_spec(p, sliding, "rope_parameters.sliding_attention",
                                     c->rope_local.theta, &c->rope_local)))
      return json_is_object(sliding)
                 ? false
                 : fail(p, "rope_parameters.sliding_attention",
                        "key 'rope_parameters.sliding_attention' must be an object");
    return true;
  }
  // transformers 4.x
  const json_t *scaling;
  if (!get_float(p, o, "", "rope_theta", false, base, kRopeBase, &c->rope.theta) ||
      !get_obj(p, o, "", "rope_scaling", &scaling))
    return false;
  return !scaling ||
         parse_rope_spec(p, scaling, "rope_scaling", c->rope.theta, &c->rope);
}

//===----------------------------------------------------------------------===//
// NemotronH Mamba2
//===----------------------------------------------------------------------===//

static bool parse_mamba(parser *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  bool conv_bias, proj_bias;
  const char *act;
  if (!get_int(p, o, "", "mamba_num_heads", true, 0, 1, &c->mamba_heads) ||
      !get_int(p, o, "", "mamba_head_dim", true, 0, 1, &c->mamba_head_dim) ||
      !get_int(p, o, "", "n_groups", true, 0, 1, &c->n_groups) ||
      !get_int(p, o, "", "ssm_state_size", true, 0, 1, &c->ssm_state) ||
      !get_int(p, o, "", "conv_kernel", true, 0, 1, &c->conv_kernel) ||
      !get_int(p, o, "", "chunk_size", false, 128, 1, &c->chunk_size) ||
      !get_bool(p, o, "", "use_conv_bias", true, &conv_bias) ||
      !get_bool(p, o, "", "use_bias", false, &proj_bias) ||
      !get_str(p, o, "", "mamba_hidden_act", "silu", &act))
    return false;
  c->mamba_eps = c->eps;
  if (c->mamba_heads % c->n_groups != 0)
    return fail(p, "n_groups", "mamba_num_heads %lld is not a multiple of n_groups %lld",
                (long long)c->mamba_heads, (long long)c->n_groups);
  if (!conv_bias)
    return fail(p, "use_conv_bias",
                "use_conv_bias false is not supported (nn.mamba2_mixer takes a "
                "conv1d bias)");
  if (proj_bias)
    return fail(p, "use_bias", "use_bias true (in_proj/out_proj biases) is not "
                               "supported by nn.mamba2_mixer");
  if (strcmp(act, "silu"))
    return fail(p, "mamba_hidden_act",
                "mamba_hidden_act '%s' is not supported (expected 'silu')", act);
  return true;
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

  parser p = {.cfg = cfg, .err = err, .errlen = errlen};
  json_error_t jerr;
  p.root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  bool ok = false;
  if (!p.root) {
    snprintf(err, errlen, "%s:%d:%d: error: malformed JSON: %s", path, jerr.line,
             jerr.column, jerr.text);
  } else if (!json_is_object(p.root)) {
    fail(&p, NULL, "the config must be a JSON object, got %s", type_name(p.root));
  } else if (parse_arch(&p) && parse_sizes(&p)) {
    cfg->blocks = calloc((size_t)cfg->layers, sizeof *cfg->blocks);
    if (!cfg->blocks)
      fail(&p, "num_hidden_layers", "out of memory for %lld layers",
           (long long)cfg->layers);
    else if (cfg->arch->family == IMPORT_NEMOTRON_H)
      ok = parse_hybrid_pattern(&p) && parse_mamba(&p);
    else
      ok = parse_decoder_layers(&p) && (!cfg->arch->rope || parse_rope(&p));
  }
  json_decref(p.root);
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
  *cfg = (import_config){.scope = ""};
}

bool import_config_locate(const import_config *cfg, const char *key, int *line,
                          int *col) {
  char path[256];
  if (cfg->scope[0])
    snprintf(path, sizeof path, "%s.%s", cfg->scope, key);
  else
    snprintf(path, sizeof path, "%s", key);
  if (cfg->text && json_locate(cfg->text, cfg->text_len, path, line, col))
    return true;
  if (cfg->text && cfg->scope[0] &&
      json_locate(cfg->text, cfg->text_len, cfg->scope, line, col))
    return false;
  *line = 1;
  *col = 1;
  return false;
}

int64_t import_config_count_blocks(const import_config *cfg, import_block kind) {
  int64_t n = 0;
  for (int64_t i = 0; i < cfg->layers; ++i)
    n += cfg->blocks[i] == kind;
  return n;
}
