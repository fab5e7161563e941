// The typed reading of config.json (config_reader.h): lookups of keys with
// their config class's defaults when absent, checked types and ranges,
// errors at the key's line and column, the keys read (for the report of
// ignored ones). What the keys mean is config.c's.
#include "config_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_locate.h"

// Appends one formatted line to the heap string *buf (nothing when out of
// memory: these are reports, not results).
void reader_append_line(char **buf, const char *fmt, ...) {
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
void reader_mark_seen(import_reader *p, bool top, const char *key) {
  char k[200];
  snprintf(k, sizeof k, "%s%s", top ? "^" : "", key);
  if (p->seen)
    json_object_set_new(p->seen, k, json_true());
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

// `scope.key`, or `key` at the top level.
static const char *qualify(const import_reader *p, const char *key, char *buf, size_t len) {
  if (*p->scope[0])
    snprintf(buf, len, "%s.%s", *p->scope, key);
  else
    snprintf(buf, len, "%s", key);
  return buf;
}

// Writes `PATH:LINE:COL: error: MESSAGE` (the position of `key` below the
// scope, when written; `PATH: error:` otherwise) and returns false.
// A value the config does not write came from its class: the message says
// which, so that the user knows what to write.
static void note_default(import_reader *p, const char *key) {
  const import_config_class *cls = p->cls;
  const char *value = import_config_class_default(cls, key);
  size_t n = strlen(p->err);
  if (value && n < p->errlen)
    snprintf(p->err + n, p->errlen - n, " (%s is not written: %s's default %s)", key, cls->name,
             value);
}

bool reader_fail(import_reader *p, const char *key, const char *fmt, ...) {
  int line, col;
  int n;
  bool written = key && reader_locate(p->text, p->text_len, *p->scope, key, &line, &col);
  if (written)
    n = snprintf(p->err, p->errlen, "%s:%d:%d: error: ", p->path, line, col);
  else
    n = snprintf(p->err, p->errlen, "%s: error: ", p->path);
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

bool reader_locate(const char *text, size_t len, const char *scope, const char *key, int *line,
                   int *col) {
  char path[256];
  if (scope[0])
    snprintf(path, sizeof path, "%s.%s", scope, key);
  else
    snprintf(path, sizeof path, "%s", key);
  if (text && json_locate(text, len, path, line, col))
    return true;
  if (text && scope[0] && json_locate(text, len, scope, line, col))
    return false;
  *line = 1;
  *col = 1;
  return false;
}

const char *reader_type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
    return "an integer";
  case JSON_REAL:
    return "a real number";
  case JSON_TRUE:
    return "true";
  case JSON_FALSE:
    return "false";
  case JSON_NULL:
    return "null";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Typed lookups
//===----------------------------------------------------------------------===//

// The default of `key` (absent from object `o`) from the config class of
// `o`, when `o` is the text config or a composite's top level: recorded in
// cfg->defaults_used. NULL when the class has none.
static const json_t *class_default(import_reader *p, const json_t *o, const char *key) {
  bool top = o == p->root && p->root != p->obj;
  const import_config_class *cls = top ? p->top_cls : o == p->obj ? p->cls : NULL;
  const char *text = import_config_class_default(cls, key);
  json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
  if (!v || json_array_append_new(p->defaults, v) != 0)
    return NULL;
  char where[200];
  if (top || !*p->scope[0])
    snprintf(where, sizeof where, "%s", key);
  else
    snprintf(where, sizeof where, "%s.%s", *p->scope, key);
  char line[400];
  snprintf(line, sizeof line, "%s = %s (%s default, %s)", where, text, cls->name, cls->source);
  if (!*p->defaults_used || !strstr(*p->defaults_used, line))
    reader_append_line(p->defaults_used, "%s", line);
  return json_is_null(v) ? NULL : v;
}

const json_t *reader_lookup(import_reader *p, reader_key *k, const json_t *o, const char *opath,
                            const char *key) {
  k->o = o;
  k->opath = opath;
  k->key = key;
  if (opath[0])
    snprintf(k->rel, sizeof k->rel, "%s.%s", opath, key);
  else
    snprintf(k->rel, sizeof k->rel, "%s", key);
  qualify(p, k->rel, k->full, sizeof k->full);
  if (!opath[0] && (o == p->obj || o == p->root))
    reader_mark_seen(p, o != p->obj, key);
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

// A required key that is absent: the error (false).
static bool missing(import_reader *p, const reader_key *k) {
  return reader_fail(p, NULL, "missing required key '%s' (%s)", k->full, p->model);
}

bool reader_get_int(import_reader *p, const json_t *o, const char *opath, const char *key,
                    bool required, int64_t def, int64_t min, int64_t *out) {
  reader_key k;
  const json_t *v = reader_lookup(p, &k, o, opath, key);
  if (!v) {
    *out = def;
    return !required || missing(p, &k);
  }
  if (!json_is_integer(v))
    return reader_fail(p, k.rel, "key '%s' must be an integer, got %s", k.full,
                       reader_type_name(v));
  json_int_t x = json_integer_value(v);
  if (x > kMaxSize)
    return reader_fail(p, k.rel, "key '%s' is %lld, beyond any real model (limit %lld)", k.full,
                       (long long)x, (long long)kMaxSize);
  if (x < min)
    return reader_fail(p, k.rel, "key '%s' must be %s, got %lld", k.full,
                       min == 1   ? "positive"
                       : min == 0 ? "non-negative"
                                  : "larger",
                       (long long)x);
  *out = (int64_t)x;
  return true;
}

bool reader_get_float(import_reader *p, const json_t *o, const char *opath, const char *key,
                      bool required, double def, reader_range rg, double *out) {
  reader_key k;
  const json_t *v = reader_lookup(p, &k, o, opath, key);
  if (!v) {
    *out = def;
    return !required || missing(p, &k);
  }
  if (!json_is_number(v))
    return reader_fail(p, k.rel, "key '%s' must be a number, got %s", k.full, reader_type_name(v));
  double x = json_number_value(v);
  if (!(x > rg.lo && x <= rg.hi))
    return reader_fail(p, k.rel, "key '%s' is %g: it must be in (%g, %g]", k.full, x, rg.lo, rg.hi);
  *out = x;
  return true;
}

bool reader_get_bool(import_reader *p, const json_t *o, const char *opath, const char *key,
                     bool def, bool *out) {
  reader_key k;
  const json_t *v = reader_lookup(p, &k, o, opath, key);
  if (!v) {
    *out = def;
    return true;
  }
  if (!json_is_boolean(v))
    return reader_fail(p, k.rel, "key '%s' must be true or false, got %s", k.full,
                       reader_type_name(v));
  *out = json_is_true(v);
  return true;
}

// A string; *out = def (which may be NULL) when absent.
bool reader_get_str(import_reader *p, const json_t *o, const char *opath, const char *key,
                    const char *def, const char **out) {
  reader_key k;
  const json_t *v = reader_lookup(p, &k, o, opath, key);
  if (!v) {
    *out = def;
    return true;
  }
  if (!json_is_string(v))
    return reader_fail(p, k.rel, "key '%s' must be a string, got %s", k.full, reader_type_name(v));
  *out = json_string_value(v);
  return true;
}

// An object or absent/null (*out = NULL).
bool reader_get_obj(import_reader *p, const json_t *o, const char *opath, const char *key,
                    const json_t **out) {
  reader_key k;
  const json_t *v = reader_lookup(p, &k, o, opath, key);
  if (v && !json_is_object(v))
    return reader_fail(p, k.rel, "key '%s' must be an object, got %s", k.full, reader_type_name(v));
  *out = v;
  return true;
}
