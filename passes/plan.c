// Plans as data: JSON parsing (jansson), the built-in plans embedded from
// passes/plans/*.json, and Hugging Face module pattern matching.
#include "plan.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

//===----------------------------------------------------------------------===//
// Placements and styles
//===----------------------------------------------------------------------===//

bool tp_placement_parse(const char *text, tp_placement *out) {
  if (!strcmp(text, "Replicate") || !strcmp(text, "Replicate()")) {
    *out = TP_R;
    return true;
  }
  if (!strcmp(text, "Partial") || !strcmp(text, "Partial()")) {
    *out = TP_P;
    return true;
  }
  // Shard(d): an integer d (negative counts from the last dim), bounded so
  // that it never wraps (Shard(2147483648) once read as Shard(-2147483648)).
  if (strncmp(text, "Shard(", 6) != 0)
    return false;
  const char *p = text + 6;
  char *end;
  errno = 0;
  long dim = strtol(p, &end, 10);
  if (end == p || (*p != '-' && !isdigit((unsigned char)*p)) || errno == ERANGE ||
      strcmp(end, ")") != 0 || dim < -1000000 || dim > 1000000)
    return false;
  *out = TP_S((int)dim);
  return true;
}

const char *tp_placement_str(tp_placement p, char *buf, size_t len) {
  if (p.kind == TP_SHARD)
    snprintf(buf, len, "Shard(%d)", p.dim);
  else
    snprintf(buf, len, "%s", p.kind == TP_REPLICATE ? "Replicate" : "Partial");
  return buf;
}

bool tp_placement_normalize(tp_placement *p, int rank) {
  if (p->kind != TP_SHARD)
    return true;
  // Out of range: left as written, so that messages show what was given.
  int dim = p->dim < 0 ? p->dim + rank : p->dim;
  if (dim < 0 || dim >= rank)
    return false;
  p->dim = dim;
  return true;
}

bool tp_placement_equal(tp_placement a, tp_placement b) {
  return a.kind == b.kind && (a.kind != TP_SHARD || a.dim == b.dim);
}

static const char *const kStyleNames[TP_STYLE_COUNT] = {
    [TP_STYLE_COLWISE] = "colwise",
    [TP_STYLE_ROWWISE] = "rowwise",
    [TP_STYLE_COLWISE_REP] = "colwise_rep",
    [TP_STYLE_ROWWISE_REP] = "rowwise_rep",
    [TP_STYLE_COLWISE_GATHER_OUTPUT] = "colwise_gather_output",
    [TP_STYLE_SEQUENCE_PARALLEL] = "sequence_parallel",
    [TP_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE] = "replicated_with_grad_allreduce",
};

bool tp_style_parse(const char *text, tp_style *out) {
  for (int s = 0; s < TP_STYLE_COUNT; ++s)
    if (!strcmp(text, kStyleNames[s])) {
      *out = (tp_style)s;
      return true;
    }
  return false;
}

const char *tp_style_name(tp_style style) {
  return style < TP_STYLE_COUNT ? kStyleNames[style] : "?";
}

//===----------------------------------------------------------------------===//
// Matching
//===----------------------------------------------------------------------===//

bool tp_pattern_match(const char *pattern, const char *module, size_t len) {
  const char *m = module, *end = module + len;
  while (*pattern) {
    size_t plen = strcspn(pattern, ".");
    const char *dot = memchr(m, '.', (size_t)(end - m));
    size_t mlen = dot ? (size_t)(dot - m) : (size_t)(end - m);
    bool star = plen == 1 && pattern[0] == '*';
    if (m > end || (!star && (plen != mlen || memcmp(pattern, m, plen) != 0)))
      return false;
    if (star && mlen == 0)
      return false;
    pattern += plen;
    m += mlen;
    if (*pattern == '.') {
      ++pattern;
      if (m == end)
        return false;
      ++m; // skip the module's '.'
    } else {
      return m == end;
    }
  }
  return m == end;
}

tp_plan_entry *tp_plan_match(tp_plan *plan, const char *module, size_t len) {
  for (int i = 0; i < plan->num_entries; ++i)
    if (tp_pattern_match(plan->entries[i].pattern, module, len))
      return &plan->entries[i];
  return NULL;
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

void tp_plan_free(tp_plan *plan) {
  for (int i = 0; i < plan->num_entries; ++i)
    free(plan->entries[i].pattern);
  free(plan->entries);
  free(plan->source);
  *plan = (tp_plan){0};
}

// Parses a layout value: one placement string or an array of them.
static bool parse_layouts(const tp_plan *plan, const char *pattern,
                          const char *key, json_t *value, tp_placement *out,
                          int *n, char *err, size_t errlen) {
  json_t *items = json_is_array(value) ? value : NULL;
  size_t count = items ? json_array_size(items) : 1;
  if (count == 0 || count > TP_MAX_LAYOUTS) {
    snprintf(err, errlen, "%s: entry '%s': '%s' must list 1 to %d placements",
             plan->source, pattern, key, TP_MAX_LAYOUTS);
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    json_t *item = items ? json_array_get(items, i) : value;
    if (!json_is_string(item) || !tp_placement_parse(json_string_value(item), &out[i]) ||
        out[i].kind == TP_PARTIAL) {
      snprintf(err, errlen,
               "%s: entry '%s': '%s' has '%s', expected Replicate or Shard(d)",
               plan->source, pattern, key,
               json_is_string(item) ? json_string_value(item) : "a non-string");
      return false;
    }
  }
  *n = (int)count;
  return true;
}

// Fills `e` from `value` (a style string or an object).
static bool parse_entry(const tp_plan *plan, const char *pattern, json_t *value,
                        tp_plan_entry *e, char *err, size_t errlen) {
  *e = (tp_plan_entry){0};
  json_t *style = json_is_object(value) ? json_object_get(value, "style") : value;
  if (!json_is_string(style)) {
    snprintf(err, errlen,
             "%s: entry '%s' must be a style string or an object with a \"style\" string",
             plan->source, pattern);
    return false;
  }
  if (!tp_style_parse(json_string_value(style), &e->style)) {
    snprintf(err, errlen, "%s: entry '%s': Unknown parallel style '%s'", plan->source,
             pattern, json_string_value(style));
    return false;
  }
  if (json_is_object(value)) {
    const char *key;
    json_t *v;
    json_object_foreach(value, key, v) {
      bool ok = true;
      if (!strcmp(key, "style"))
        continue;
      if (!strcmp(key, "input_layouts"))
        ok = parse_layouts(plan, pattern, key, v, e->inputs, &e->num_inputs, err, errlen);
      else if (!strcmp(key, "output_layouts"))
        ok = parse_layouts(plan, pattern, key, v, e->outputs, &e->num_outputs, err, errlen);
      else if (!strcmp(key, "use_local_output")) {
        if (!json_is_boolean(v)) {
          snprintf(err, errlen, "%s: entry '%s': 'use_local_output' must be true or false",
                   plan->source, pattern);
          return false;
        }
        e->use_local_output = json_is_true(v);
      } else {
        snprintf(err, errlen,
                 "%s: entry '%s': unknown key '%s' (expected style, input_layouts, "
                 "output_layouts, use_local_output)", plan->source, pattern, key);
        return false;
      }
      if (!ok)
        return false;
    }
  }
  e->pattern = strdup(pattern);
  return e->pattern != NULL;
}

// Adds or replaces (same pattern) the entry for `pattern`.
static bool put_entry(tp_plan *plan, const char *pattern, json_t *value, char *err,
                      size_t errlen) {
  tp_plan_entry e;
  if (!parse_entry(plan, pattern, value, &e, err, errlen))
    return false;
  for (int i = 0; i < plan->num_entries; ++i)
    if (!strcmp(plan->entries[i].pattern, pattern)) {
      free(plan->entries[i].pattern);
      plan->entries[i] = e;
      return true;
    }
  tp_plan_entry *grown =
      realloc(plan->entries, (size_t)(plan->num_entries + 1) * sizeof *grown);
  if (!grown) {
    free(e.pattern);
    snprintf(err, errlen, "out of memory");
    return false;
  }
  plan->entries = grown;
  plan->entries[plan->num_entries++] = e;
  return true;
}

static json_t *load_json(const char *text, size_t len, const char *source, char *err,
                         size_t errlen) {
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    snprintf(err, errlen, "%s:%d:%d: malformed plan JSON: %s", source, jerr.line,
             jerr.column, jerr.text);
    return NULL;
  }
  if (!json_is_object(root)) {
    snprintf(err, errlen, "%s: a plan must be a JSON object mapping module patterns "
                          "to styles", source);
    json_decref(root);
    return NULL;
  }
  return root;
}

bool tp_plan_parse(const char *text, size_t len, const char *source, tp_plan *out,
                   char *err, size_t errlen) {
  *out = (tp_plan){.source = strdup(source)};
  json_t *root = load_json(text, len, source, err, errlen);
  if (!root) {
    tp_plan_free(out);
    return false;
  }
  const char *key;
  json_t *value;
  bool ok = true;
  json_object_foreach(root, key, value) {
    if (!(ok = put_entry(out, key, value, err, errlen)))
      break;
  }
  json_decref(root);
  if (ok && out->num_entries == 0) {
    snprintf(err, errlen, "%s: the plan is empty: use --tp-size=1 or give entries", source);
    ok = false;
  }
  if (!ok)
    tp_plan_free(out); // nothing half-built is handed back
  return ok;
}

//===----------------------------------------------------------------------===//
// Built-in plans
//===----------------------------------------------------------------------===//

// The embedded plan files (passes/CMakeLists.txt: plan_<file>.c).
#define DECLARE_FILE(name, file, model_types)                                                  \
  extern const char plan_##file##_json[];                                                      \
  extern const size_t plan_##file##_json_len;
TP_BUILTIN_PLANS(DECLARE_FILE)
#undef DECLARE_FILE
extern const char plan_hf_json[];
extern const size_t plan_hf_json_len;

typedef struct builtin {
  const char *name;
  const char *text;
  const size_t *len;
  const char *model_types;
} builtin;

static const builtin kBuiltins[] = {
#define BUILTIN(name, file, model_types) {#name, plan_##file##_json, &plan_##file##_json_len, model_types},
    TP_BUILTIN_PLANS(BUILTIN)
#undef BUILTIN
};

const char *tp_plan_model_types(const char *name) {
  for (size_t i = 0; i < sizeof kBuiltins / sizeof *kBuiltins; ++i)
    if (!strcmp(name, kBuiltins[i].name))
      return kBuiltins[i].model_types;
  return NULL;
}

// Adds every entry of `table` with "P." replaced by `prefix` + ".".
static bool put_prefixed(tp_plan *plan, json_t *table, const char *prefix, char *err,
                         size_t errlen) {
  const char *key;
  json_t *value;
  json_object_foreach(table, key, value) {
    char pattern[512];
    if (!strncmp(key, "P.", 2))
      snprintf(pattern, sizeof pattern, "%s.%s", prefix, key + 2);
    else
      snprintf(pattern, sizeof pattern, "%s", key);
    if (!put_entry(plan, pattern, value, err, errlen))
      return false;
  }
  return true;
}

static bool load_builtin(const builtin *b, bool sp, const tp_model_facts *facts,
                         tp_plan *out, char *err, size_t errlen) {
  char source[64];
  snprintf(source, sizeof source, "built-in plan '%s'", b->name);
  *out = (tp_plan){.source = strdup(source)};
  json_t *root = load_json(b->text, *b->len, source, err, errlen);
  if (!root)
    return false;
  // P is the first listed prefix the graph has modules under.
  json_t *prefixes = json_object_get(root, "prefixes");
  const char *prefix = json_string_value(json_array_get(prefixes, 0));
  for (size_t i = 0; facts && facts->has_prefix && i < json_array_size(prefixes); ++i) {
    const char *p = json_string_value(json_array_get(prefixes, i));
    if (facts->has_prefix(p, facts->data)) {
      prefix = p;
      break;
    }
  }
  bool ok = put_prefixed(out, json_object_get(root, "plan"), prefix, err, errlen);
  json_t *sp_table = json_object_get(root, "sequence_parallel");
  if (ok && sp) {
    if (!json_is_object(sp_table)) {
      snprintf(err, errlen, "%s: the plan has no sequence_parallel styles", source);
      ok = false;
    } else {
      ok = put_prefixed(out, sp_table, prefix, err, errlen);
    }
  }
  json_decref(root);
  return ok;
}

// The published Hugging Face plan, completed by NeMo-RL's get_hf_tp_plan rules.
static bool load_hf(bool sp, const tp_model_facts *facts, tp_plan *out, char *err,
                    size_t errlen) {
  *out = (tp_plan){.source = strdup("built-in plan 'hf'")};
  if (sp) {
    snprintf(err, errlen, "built-in plan 'hf': sequence parallel is not supported with "
                          "the published Hugging Face plan; use a built-in or custom plan");
    return false;
  }
  const char *type = facts && facts->model_type ? facts->model_type : "";
  json_t *root = load_json(plan_hf_json, plan_hf_json_len, out->source, err, errlen);
  if (!root)
    return false;
  json_t *table = json_object_get(json_object_get(root, "models"), type);
  if (!json_is_object(table) || json_object_size(table) == 0) {
    snprintf(err, errlen,
             "built-in plan 'hf': model type '%s' publishes no tensor-parallel plan: "
             "use --tp-size=1 or a custom plan", type);
    json_decref(root);
    return false;
  }
  bool ok = true;
  if (!json_object_get(table, "embed_tokens")) {
    json_t *rep = json_string("rowwise_rep");
    ok = put_entry(out, "model.embed_tokens", rep, err, errlen);
    json_decref(rep);
  }
  const char *key;
  json_t *value;
  json_object_foreach(table, key, value) {
    char pattern[512];
    snprintf(pattern, sizeof pattern, "model.%s", key);
    if (ok)
      ok = put_entry(out, pattern, value, err, errlen);
  }
  // lm_head: colwise_rep is replaced by the loss-parallel form, for speed.
  json_t *lm = json_pack("{s:s, s:s, s:b}", "style", "colwise", "output_layouts",
                         "Shard(-1)", "use_local_output", 0);
  if (ok)
    ok = put_entry(out, "lm_head", lm, err, errlen);
  json_decref(lm);
  json_decref(root);
  return ok;
}

// A plan is a few KiB; 16 MiB bounds a wrong file.
enum { kMaxPlanBytes = 16 << 20 };

static bool read_file(const char *path, char **text, size_t *len) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxPlanBytes)
    return false; // missing, a directory or a device, or too large: not a plan file
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
  bool ok = *text && fread(*text, 1, (size_t)size, f) == (size_t)size;
  fclose(f);
  if (ok)
    *len = (size_t)size;
  return ok;
}

static bool load_any(const char *spec, bool sequence_parallel,
                     const tp_model_facts *facts, tp_plan *out, char *err,
                     size_t errlen);

bool tp_plan_load(const char *spec, bool sequence_parallel,
                  const tp_model_facts *facts, tp_plan *out, char *err,
                  size_t errlen) {
  bool ok = load_any(spec, sequence_parallel, facts, out, err, errlen);
  if (!ok)
    tp_plan_free(out); // nothing half-built is handed back
  return ok;
}

static bool load_any(const char *spec, bool sequence_parallel,
                     const tp_model_facts *facts, tp_plan *out, char *err,
                     size_t errlen) {
  *out = (tp_plan){0};
  for (size_t i = 0; i < sizeof kBuiltins / sizeof *kBuiltins; ++i)
    if (!strcmp(spec, kBuiltins[i].name))
      return load_builtin(&kBuiltins[i], sequence_parallel, facts, out, err, errlen);
  if (!strcmp(spec, "hf"))
    return load_hf(sequence_parallel, facts, out, err, errlen);
  if (!strchr(spec, '/') && !strstr(spec, ".json")) {
    snprintf(err, errlen,
             "unknown plan '%s': expected " TP_PLAN_NAMES " or a path to a JSON plan file",
             spec);
    return false;
  }
  char *text = NULL;
  size_t len = 0;
  if (!read_file(spec, &text, &len)) {
    free(text);
    snprintf(err, errlen,
             "cannot read plan file '%s' (missing, unreadable, not a regular file or over "
             "%d MiB)",
             spec, kMaxPlanBytes >> 20);
    return false;
  }
  bool ok = tp_plan_parse(text, len, spec, out, err, errlen);
  free(text);
  return ok;
}
