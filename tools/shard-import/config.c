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

#include "config_class.h"
#include "json_locate.h"
#include "nn.h"
#include "source.h"

typedef struct parser {
  import_config *cfg;
  json_t *root; // the whole file
  json_t *obj;  // the text config object (root, or root[text_config])
  const import_config_class *cls, *top_cls; // of obj and (composite) root
  json_t *seen;     // keys looked up: "" + key for obj, "^" + key for root
  json_t *defaults; // the default values handed out (kept alive here)
  char *err;
  size_t errlen;
} parser;

// Appends one formatted line to the heap string *buf (nothing when out of
// memory: these are reports, not results).
__attribute__((format(printf, 2, 3))) static void append_line(char **buf, const char *fmt,
                                                               ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  size_t old = *buf ? strlen(*buf) : 0, add = strlen(line);
  char *grown = realloc(*buf, old + add + 2);
  if (!grown)
    return;
  memcpy(grown + old, line, add);
  grown[old + add] = '\n';
  grown[old + add + 1] = 0;
  *buf = grown;
}

// Records that `key` of the text config (or, with top, of the top level)
// was read, so that it is not reported as ignored.
static void mark_seen(parser *p, bool top, const char *key) {
  char k[200];
  snprintf(k, sizeof k, "%s%s", top ? "^" : "", key);
  if (p->seen)
    json_object_set_new(p->seen, k, json_true());
}

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
// A value the config does not write came from its class: the message says
// which, so that the user knows what to write.
static void note_default(parser *p, const char *key) {
  const import_config_class *cls = p->cls;
  const char *value = import_config_class_default(cls, key);
  size_t n = strlen(p->err);
  if (value && n < p->errlen)
    snprintf(p->err + n, p->errlen - n, " (%s is not written: %s's default %s)", key,
             cls->name, value);
}

__attribute__((format(printf, 3, 4))) static bool fail(parser *p, const char *key,
                                                        const char *fmt, ...) {
  int line, col;
  int n;
  bool written = key && import_config_locate(p->cfg, key, &line, &col);
  if (written)
    n = snprintf(p->err, p->errlen, "%s:%d:%d: error: ", p->cfg->path, line, col);
  else
    n = snprintf(p->err, p->errlen, "%s: error: ", p->cfg->path);
  if (n < 0 || (size_t)n >= p->errlen)
    return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  if (key && !written)
    note_default(p, key);
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

// The default of `key` (absent from object `o`) from the config class of
// `o`, when `o` is the text config or a composite's top level: recorded in
// cfg->defaults_used. NULL when the class has none.
static const json_t *class_default(parser *p, const json_t *o, const char *key) {
  bool top = o == p->root && p->root != p->obj;
  const import_config_class *cls = top ? p->top_cls : o == p->obj ? p->cls : NULL;
  const char *text = import_config_class_default(cls, key);
  json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
  if (!v || json_array_append_new(p->defaults, v) != 0)
    return NULL;
  char where[200];
  if (top || !p->cfg->scope[0])
    snprintf(where, sizeof where, "%s", key);
  else
    snprintf(where, sizeof where, "%s.%s", p->cfg->scope, key);
  char line[400];
  snprintf(line, sizeof line, "%s = %s (%s default, %s)", where, text, cls->name, cls->source);
  if (!p->cfg->defaults_used || !strstr(p->cfg->defaults_used, line))
    append_line(&p->cfg->defaults_used, "%s", line);
  return json_is_null(v) ? NULL : v;
}

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
  if (!opath[0] && (o == p->obj || o == p->root))
    mark_seen(p, o != p->obj, key);
  const json_t *v = json_object_get(o, key);
  if (!v && !opath[0])
    return class_default(p, o, key);
  return json_is_null(v) ? NULL : v;
}

// Sizes above this are rejected before they can overflow products of sizes
// (vocab x hidden, heads x head_dim) in 64 bits.
// 2^24: beyond every real model dimension (vocabularies of ~262k, hidden
// sizes of ~16k), and small enough that shapes multiply without overflow.
static const int64_t kMaxSize = INT64_C(1) << 24;

// Layers beyond this are rejected before the graph is built op by op: each
// layer holds one parameter tensor at least, and a compiled step takes at
// most NN_MAX_FUNC_ARGS arguments, four of them the input ids, labels,
// position ids and segment ids (the compiler's limit: one constant for both).
static const int64_t kMaxLayers = NN_MAX_FUNC_ARGS - 4;

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
// (arch->padding_idx): absent, the config class's default (config_class.c);
// null, none; a
// negative id counts from the end (torch's padding_idx); outside [-vocab,
// vocab) refused, as torch's nn.Embedding refuses it.
static bool get_padding_idx(parser *p, const json_t *o, import_config *c) {
  c->padding_idx = -1;
  if (!c->arch->padding_idx)
    return true;
  mark_seen(p, false, "pad_token_id");
  const json_t *raw = json_object_get(o, "pad_token_id");
  if (raw && json_is_null(raw))
    return true;
  key_ref k;
  const json_t *v = lookup(p, &k, o, "", "pad_token_id");
  if (!v) // absent with a None default
    return true;
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

  p->cls = import_config_class_by_name(c->arch->config_class);
  p->top_cls = import_config_class_by_name(c->arch->top_config_class);
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
  if (!get_int(p, o, "", "vocab_size", true, 0, 1, &c->vocab) ||
      !get_int(p, o, "", "hidden_size", true, 0, 1, &c->hidden) ||
      !get_int(p, o, "", "intermediate_size", true, 0, 1, &c->intermediate) ||
      !get_int(p, o, "", "num_hidden_layers", implied_layers == 0, implied_layers, 1,
               &c->layers) ||
      !get_int(p, o, "", "num_attention_heads", true, 0, 1, &c->heads) ||
      !get_int(p, o, "", "num_key_value_heads", false, c->heads, 1, &c->kv_heads))
    return false;
  // Not used by the graph (RoPE takes positions as they come), but a config
  // with no positions at all is broken: checked where written.
  int64_t max_positions;
  if (!get_int(p, o, "", "max_position_embeddings", false, 1, 1, &max_positions))
    return false;
  if (c->layers > kMaxLayers)
    return fail(p, "num_hidden_layers", "num_hidden_layers %lld is more than a compiled step "
                                        "takes (limit %lld: one parameter tensor per layer "
                                        "at least, %d function arguments in all)",
                (long long)c->layers, (long long)kMaxLayers, NN_MAX_FUNC_ARGS);
  if (c->heads % c->kv_heads != 0)
    return fail(p, "num_key_value_heads",
                "num_attention_heads %lld is not a multiple of "
                "num_key_value_heads %lld",
                (long long)c->heads, (long long)c->kv_heads);

  // head_dim: explicit (NemotronH's 4.x remote code spells it
  // attention_head_dim; transformers 5 reads head_dim), else the class's
  // default, else implied.
  mark_seen(p, false, "attention_head_dim");
  const char *hd_key = !json_object_get(o, "head_dim") && json_object_get(o, "attention_head_dim")
                           ? "attention_head_dim"
                           : "head_dim";
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
  bool default_tie = false;
  if (c->arch->text_config)
    mark_seen(p, true, "tie_word_embeddings");
  if (c->arch->text_config && !json_object_get(o, "tie_word_embeddings")) {
    c->scope = "";
    bool ok = get_bool(p, p->root, "", "tie_word_embeddings", false, &default_tie);
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
  mark_seen(p, false, "hybrid_override_pattern");
  mark_seen(p, false, "layers_block_type");
  // transformers 5 takes layers_block_type when both are written.
  if (json_is_array(types))
    pattern = NULL;
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
                    "(expected 'M' Mamba2, '*' attention or '-' MLP%s)",
                    i, s[i], s[i] == 'E' ? "; 'E' mixture-of-experts blocks are not" : "");
      }
    }
    return true;
  }
  if (json_is_array(types)) {
    if ((int64_t)json_array_size(types) != c->layers)
      return fail(p, "layers_block_type",
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
        return fail(p, "layers_block_type",
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
  // The keys transformers derives layer_types from when it is absent, and
  // the window a sliding layer would have: considered either way.
  static const char *const kLayerKeys[] = {"layer_types", "sliding_window_pattern",
                                           "use_sliding_window", "max_window_layers",
                                           "sliding_window"};
  for (size_t i = 0; i < sizeof kLayerKeys / sizeof *kLayerKeys; ++i)
    mark_seen(p, false, kLayerKeys[i]);
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
    // Qwen2Config: sliding_window None (null) disables the window.
    if (json_is_null(json_object_get(o, "sliding_window")))
      sliding = false;
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

__attribute__((format(printf, 3, 4))) static void warn(parser *p, const char *key,
                                                        const char *fmt, ...);

// A RoPE object with neither rope_type nor type is default RoPE, as
// transformers reads it; its other keys (a "factor" meant for linear or
// llama3 scaling) change nothing: one warning naming them, in transformers'
// words, and that they are ignored.
static void warn_untyped_rope(parser *p, const json_t *o, const char *opath) {
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
    warn_untyped_rope(p, o, opath);
    snprintf(r->type, sizeof r->type, "default");
    return true;
  }
  if (!strcmp(type, "linear")) { // positions divided by factor (Gemma 3 4B and up)
    snprintf(r->type, sizeof r->type, "linear");
    return get_float(p, o, opath, "factor", true, 0, kRopeFactor, &r->factor);
  }
  if (strcmp(type, "llama3"))
    return fail(p, where, "rope_type '%s' is not supported (supported: default, "
                          "llama3, linear)",
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

// A number default of the text config's class, not recorded as used (for
// the bases of rope_parameters entries, which transformers 5 always writes).
static double peek_default(const parser *p, const char *key, double fallback) {
  const char *text = import_config_class_default(p->cls, key);
  return text ? strtod(text, NULL) : fallback;
}

static bool parse_rope(parser *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  mark_seen(p, false, "rope_theta");
  mark_seen(p, false, "rope_local_base_freq");
  mark_seen(p, false, "rope_scaling");
  double base = json_object_get(o, "rope_theta") ? 0 : peek_default(p, "rope_theta", 1e4);
  double local = peek_default(p, "rope_local_base_freq", 1e4);
  const json_t *params;
  if (!get_obj(p, o, "", "rope_parameters", &params))
    return false;
  if (!params) { // transformers 4.x: the bases are keys of their own
    if (!get_float(p, o, "", "rope_theta", false, base, kRopeBase, &base) ||
        (c->arch->local_rope &&
         !get_float(p, o, "", "rope_local_base_freq", false, local, kRopeBase, &local)))
      return false;
  } else if (json_object_get(o, "rope_theta") &&
             !get_float(p, o, "", "rope_theta", false, base, kRopeBase, &base)) {
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
  if (!get_obj(p, o, "", "rope_scaling", &scaling))
    return false;
  return !scaling ||
         parse_rope_spec(p, scaling, "rope_scaling", c->rope.theta, &c->rope);
}

//===----------------------------------------------------------------------===//
// NemotronH Mamba2
//===----------------------------------------------------------------------===//

// The key NemotronHConfig reads for `canonical`: its alias when written
// (__post_init__ pops mamba_n_groups, mamba_d_conv, ... over the field).
static const char *aliased(parser *p, const char *canonical, const char *alias) {
  mark_seen(p, false, canonical);
  mark_seen(p, false, alias);
  return json_object_get(p->obj, alias) ? alias : canonical;
}

static bool parse_mamba(parser *p) {
  import_config *c = p->cfg;
  const json_t *o = p->obj;
  bool conv_bias, proj_bias;
  const char *act;
  if (!get_int(p, o, "", "mamba_num_heads", true, 0, 1, &c->mamba_heads) ||
      !get_int(p, o, "", "mamba_head_dim", true, 0, 1, &c->mamba_head_dim) ||
      !get_int(p, o, "", aliased(p, "n_groups", "mamba_n_groups"), true, 0, 1, &c->n_groups) ||
      !get_int(p, o, "", "ssm_state_size", true, 0, 1, &c->ssm_state) ||
      !get_int(p, o, "", aliased(p, "conv_kernel", "mamba_d_conv"), true, 0, 1,
               &c->conv_kernel) ||
      !get_int(p, o, "", aliased(p, "chunk_size", "mamba_chunk_size"), false, 128, 1,
               &c->chunk_size) ||
      !get_bool(p, o, "", aliased(p, "use_conv_bias", "mamba_conv_bias"), true, &conv_bias) ||
      !get_bool(p, o, "", "use_bias", false, &proj_bias) ||
      !get_str(p, o, "", "mamba_hidden_act", "silu", &act) ||
      !get_float(p, o, "", aliased(p, "time_step_min", "mamba_dt_min"), false, 0.001,
                 (range){-1, 1e6}, &c->mamba_dt_min))
    return false;
  c->mamba_eps = c->eps;
  if (c->mamba_dt_min < 0)
    return fail(p, "time_step_min", "time_step_min %g must be >= 0 (dt's lower clamp)",
                c->mamba_dt_min);
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
// Keys the step ignores
//===----------------------------------------------------------------------===//

static void warn(parser *p, const char *key, const char *fmt, ...) {
  int line = 1, col = 1;
  import_config_locate(p->cfg, key, &line, &col);
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  append_line(&p->cfg->warnings, "%s:%d:%d: warning: %s", p->cfg->path, line, col, msg);
}

// Dropout: transformers applies it in training; the compiled step has none.
static void check_dropout(parser *p, const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  if (json_is_number(v) && json_number_value(v) != 0.0)
    warn(p, key, "key '%s' is %g: the compiled step has no dropout, it trains as with 0",
         key, json_number_value(v));
}

// Every key of the text config (and of a composite's top level) that was
// not read and is not inert for its class: a warning each.
static void report_ignored(parser *p) {
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

  parser p = {.cfg = cfg, .err = err, .errlen = errlen, .seen = json_object(),
              .defaults = json_array()};
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
