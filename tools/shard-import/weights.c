// Checking safetensors checkpoints (one file, or shards listed by an index)
// against the graph's parameters.
#include "weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/checkpoint_names.h"
#include "shardrt/checkpoint_source.h"
#include "shardrt/safetensors.h"

typedef struct checker {
  const import_model *m;
  srt_dtype dtype;  // what every parameter must be stored as
  bool convertible; // or any dtype the training driver converts (F32, BF16, F16, F64)
  const import_param **order; // the parameters sorted by name
  char *err;
  size_t errlen;
  const srt_checkpoint_source *src;
  srt_checkpoint_names names;
  int layout; // of the checkpoint's names
} checker;

__attribute__((format(printf, 3, 4))) static bool fail(checker *c, const char *file,
                                                        const char *fmt, ...) {
  int n = snprintf(c->err, c->errlen, "%s: error: ", file);
  if (n < 0 || (size_t)n >= c->errlen)
    return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return false;
}

// Passes on a reader error ("PATH: message") as "PATH: error: message".
static bool fail_status(checker *c, srt_status s) {
  const char *msg = srt_status_message(s);
  const char *colon = strstr(msg, ": ");
  if (colon)
    snprintf(c->err, c->errlen, "%.*s: error: %s", (int)(colon - msg), msg, colon + 2);
  else
    snprintf(c->err, c->errlen, "error: %s", msg);
  srt_status_free(s);
  return false;
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(const import_param *const *)a)->name,
                (*(const import_param *const *)b)->name);
}

// The parameter named `name`, or NULL.
static const import_param *find_param(const checker *c, const char *name) {
  import_param key = {.name = (char *)name};
  const import_param *k = &key;
  const import_param **hit =
      bsearch(&k, c->order, (size_t)c->m->num_params, sizeof *c->order, by_name);
  return hit ? *hit : NULL;
}

static const char *dims_str(int rank, const int64_t *dims, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < rank && n < len; ++i)
    n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "",
                          (long long)dims[i]);
  if (n < len)
    snprintf(buf + n, len - n, "]");
  return buf;
}

static bool convertible(srt_dtype d) {
  return d == SRT_F32 || d == SRT_BF16 || d == SRT_F16 || d == SRT_F64;
}

// Compares tensor `t` of `file` with parameter `p`.
static bool check_tensor(checker *c, const char *file, const srt_tensor_info *t,
                         const import_param *p) {
  bool same = t->rank == p->rank;
  for (int i = 0; same && i < p->rank; ++i)
    same = t->shape[i] == p->dims[i];
  char b1[128], b2[128];
  if (!same)
    return fail(c, file, "tensor '%s' has shape %s, but the graph expects %s",
                t->name, dims_str(t->rank, t->shape, b1, sizeof b1),
                dims_str(p->rank, p->dims, b2, sizeof b2));
  if (c->convertible ? !convertible(t->dtype) : t->dtype != c->dtype)
    return c->convertible
               ? fail(c, file, "tensor '%s' is %s; training loads F32, BF16, F16 or F64",
                      t->name, srt_dtype_name(t->dtype))
               : fail(c, file, "tensor '%s' is %s, but the graph's parameters are %s%s",
                t->name, srt_dtype_name(t->dtype), srt_dtype_name(c->dtype),
                t->dtype == SRT_BF16 ? " (import with --dtype bf16)"
                : t->dtype == SRT_F32 ? " (import with --dtype f32)"
                                      : "");
  return true;
}

// A tensor the graph has no parameter for (`mem`: its in-memory name): the
// tied lm_head copy and the tensors of carried modules are fine.
static bool check_extra(checker *c, const char *file, const srt_tensor_info *t,
                        const char *mem) {
  const import_model *m = c->m;
  if (m->tied_name && !strcmp(mem, m->tied_name))
    return check_tensor(c, file, t, &m->params[m->tied_to]);
  if (srt_checkpoint_name_carried(&c->names, mem))
    return true;
  return fail(c, file, "tensor '%s' is not a parameter of the graph (extra tensor)",
              t->name);
}

//===----------------------------------------------------------------------===//
// Checking the checkpoint
//===----------------------------------------------------------------------===//

// How many parameters the checkpoint holds under `layout`.
static int found_under(const checker *c, int layout) {
  int found = 0;
  char stored[1024];
  for (int i = 0; i < c->m->num_params; ++i)
    found += srt_checkpoint_name_stored(&c->names, layout, c->m->params[i].name, stored,
                                        sizeof stored) &&
             srt_checkpoint_source_lookup(c->src, stored, NULL) != NULL;
  return found;
}

// The layout holding the most parameters (the first of equals).
static int choose_layout(const checker *c) {
  int best = 0, most = -1;
  for (int l = 0; l <= c->names.num_layouts; ++l) {
    int n = found_under(c, l);
    if (n > most) {
      best = l;
      most = n;
    }
  }
  return best;
}

static bool check_source(checker *c) {
  const char *where = srt_checkpoint_source_path(c->src);
  c->layout = choose_layout(c);
  char stored[1024], mem[1024], b[128];
  for (int i = 0; i < c->m->num_params; ++i) {
    const import_param *p = &c->m->params[i];
    const srt_safetensors *f = NULL;
    const srt_tensor_info *t =
        srt_checkpoint_name_stored(&c->names, c->layout, p->name, stored, sizeof stored)
            ? srt_checkpoint_source_lookup(c->src, stored, &f)
            : NULL;
    if (!t)
      return fail(c, where, "missing tensor '%s' (%s %s, required by the graph)", stored,
                  c->convertible ? "F32, BF16 or F16" : srt_dtype_name(c->dtype),
                  dims_str(p->rank, p->dims, b, sizeof b));
    if (!check_tensor(c, srt_safetensors_path(f), t, p))
      return false;
  }
  for (size_t i = 0; i < srt_checkpoint_source_count(c->src); ++i) {
    const srt_safetensors *f;
    const srt_tensor_info *t = srt_checkpoint_source_get(c->src, i, &f);
    if (!srt_checkpoint_name_in_memory(&c->names, c->layout, t->name, mem, sizeof mem))
      return fail(c, srt_safetensors_path(f), "tensor name '%.200s...' is too long", t->name);
    if (!find_param(c, mem) && !check_extra(c, srt_safetensors_path(f), t, mem))
      return false;
  }
  return true;
}

bool import_check_weights(const char *path, const import_model *m, srt_dtype dtype,
                          bool any_float, const char *checkpoint_names, char *err,
                          size_t errlen) {
  checker c = {.m = m, .dtype = dtype, .convertible = any_float, .err = err, .errlen = errlen};
  srt_status s = srt_checkpoint_names_parse(checkpoint_names, &c.names);
  if (s)
    return fail_status(&c, s);
  c.order = malloc((size_t)(m->num_params ? m->num_params : 1) * sizeof *c.order);
  if (!c.order) {
    snprintf(err, errlen, "%s: error: out of memory", path);
    return false;
  }
  for (int i = 0; i < m->num_params; ++i)
    c.order[i] = &m->params[i];
  qsort(c.order, (size_t)m->num_params, sizeof *c.order, by_name);
  srt_checkpoint_source *src = NULL;
  s = srt_checkpoint_source_open(path, &src);
  bool ok = s ? fail_status(&c, s) : (c.src = src, check_source(&c));
  srt_checkpoint_source_close(src);
  free(c.order);
  return ok;
}
