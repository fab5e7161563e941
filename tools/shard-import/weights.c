// Checking safetensors checkpoints (one file, or shards listed by an index)
// against the graph's parameters.
#include "weights.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardrt/safetensors.h"
#include "source.h"

typedef struct checker {
  const import_model *m;
  srt_dtype dtype;
  const import_param **order; // the parameters sorted by name
  char *err;
  size_t errlen;
  // The checkpoint: shards and, in index mode, the weight map.
  srt_safetensors **files;
  char **file_names; // as written in the index (or the file's path)
  int num_files;
  json_t *weight_map; // NULL for a single file
  const char *index_path;
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
  if (t->dtype != c->dtype)
    return fail(c, file, "tensor '%s' is %s, but the graph's parameters are %s%s",
                t->name, srt_dtype_name(t->dtype), srt_dtype_name(c->dtype),
                t->dtype == SRT_BF16 ? " (import with --dtype bf16)"
                : t->dtype == SRT_F32 ? " (import with --dtype f32)"
                                      : "");
  return true;
}

// A tensor the graph has no parameter for: the tied lm_head copy is fine.
static bool check_extra(checker *c, const char *file, const srt_tensor_info *t) {
  const import_model *m = c->m;
  if (m->tied_name && !strcmp(t->name, m->tied_name))
    return check_tensor(c, file, t, &m->params[m->tied_to]);
  return fail(c, file, "tensor '%s' is not a parameter of the graph (extra tensor)",
              t->name);
}

//===----------------------------------------------------------------------===//
// Opening the checkpoint
//===----------------------------------------------------------------------===//

static bool add_file(checker *c, const char *path, const char *name, int *index) {
  for (int i = 0; i < c->num_files; ++i)
    if (!strcmp(c->file_names[i], name)) {
      *index = i;
      return true;
    }
  srt_safetensors *f;
  srt_status s = srt_safetensors_open(path, &f);
  if (s)
    return fail_status(c, s);
  srt_safetensors **files = realloc(c->files, (size_t)(c->num_files + 1) * sizeof *files);
  char **names = files ? realloc(c->file_names, (size_t)(c->num_files + 1) * sizeof *names)
                       : NULL;
  if (files)
    c->files = files;
  if (names)
    c->file_names = names;
  char *copy = names ? strdup(name) : NULL;
  if (!copy) {
    srt_safetensors_close(f);
    return fail(c, path, "out of memory");
  }
  c->files[c->num_files] = f;
  c->file_names[c->num_files] = copy;
  *index = c->num_files++;
  return true;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

// One file: every parameter in it, nothing else.
static bool check_single(checker *c, const char *path) {
  int fi;
  if (!add_file(c, path, path, &fi))
    return false;
  srt_safetensors *f = c->files[fi];
  for (int i = 0; i < c->m->num_params; ++i) {
    const import_param *p = &c->m->params[i];
    const srt_tensor_info *t = srt_safetensors_lookup(f, p->name);
    char b[128];
    if (!t)
      return fail(c, path, "missing tensor '%s' (%s %s, required by the graph)",
                  p->name, srt_dtype_name(c->dtype),
                  dims_str(p->rank, p->dims, b, sizeof b));
    if (!check_tensor(c, path, t, p))
      return false;
  }
  for (size_t i = 0; i < srt_safetensors_count(f); ++i) {
    const srt_tensor_info *t = srt_safetensors_get(f, i);
    if (!find_param(c, t->name) && !check_extra(c, path, t))
      return false;
  }
  return true;
}

// Shards listed by model.safetensors.index.json in `dir`.
static bool check_index(checker *c, const char *dir, const char *index_path) {
  // Read as every other input: a regular file only (a FIFO would block),
  // of bounded size (a real index is under 100 KiB).
  char why[1024];
  size_t len = 0;
  char *text = tool_read_file(index_path, (size_t)64 << 20, &len, why, sizeof why);
  if (!text)
    return fail(c, index_path, "%s", why);
  json_error_t jerr;
  json_t *index = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (!index)
    return fail(c, index_path, "malformed JSON at line %d, column %d: %s",
                jerr.line, jerr.column, jerr.text);
  c->weight_map = json_incref(json_object_get(index, "weight_map"));
  json_decref(index);
  if (!json_is_object(c->weight_map))
    return fail(c, index_path, "missing or non-object key 'weight_map'");

  // Open every shard the map names; check each listed tensor exists there.
  const char *name;
  json_t *value;
  char path[4096];
  json_object_foreach(c->weight_map, name, value) {
    const char *file = json_string_value(value);
    if (!file || !file[0] || strchr(file, '/') || !strcmp(file, "..") ||
        !strcmp(file, "."))
      return fail(c, index_path,
                  "weight_map entry '%s' must be a file name in the same directory",
                  name);
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
      return fail(c, index_path, "the path of shard '%s' is too long", file);
    int fi;
    if (!add_file(c, path, file, &fi))
      return false;
    const srt_tensor_info *t = srt_safetensors_lookup(c->files[fi], name);
    if (!t)
      return fail(c, index_path,
                  "weight_map puts tensor '%s' in '%s', which has no such tensor",
                  name, file);
    const import_param *p = find_param(c, name);
    if (p ? !check_tensor(c, srt_safetensors_path(c->files[fi]), t, p)
          : !check_extra(c, srt_safetensors_path(c->files[fi]), t))
      return false;
  }
  for (int i = 0; i < c->m->num_params; ++i) {
    const import_param *p = &c->m->params[i];
    char b[128];
    if (!json_object_get(c->weight_map, p->name))
      return fail(c, index_path, "missing tensor '%s' (%s %s, required by the graph)",
                  p->name, srt_dtype_name(c->dtype),
                  dims_str(p->rank, p->dims, b, sizeof b));
  }
  for (int i = 0; i < c->num_files; ++i) {
    for (size_t j = 0; j < srt_safetensors_count(c->files[i]); ++j) {
      const srt_tensor_info *t = srt_safetensors_get(c->files[i], j);
      if (!json_object_get(c->weight_map, t->name))
        return fail(c, srt_safetensors_path(c->files[i]),
                    "tensor '%s' is not listed in %s (extra tensor)", t->name,
                    index_path);
    }
  }
  return true;
}

bool import_check_weights(const char *path, const import_model *m,
                          srt_dtype dtype, char *err, size_t errlen) {
  checker c = {.m = m, .dtype = dtype, .err = err, .errlen = errlen};
  c.order = malloc((size_t)(m->num_params ? m->num_params : 1) * sizeof *c.order);
  if (!c.order) {
    snprintf(err, errlen, "%s: error: out of memory", path);
    return false;
  }
  for (int i = 0; i < m->num_params; ++i)
    c.order[i] = &m->params[i];
  qsort(c.order, (size_t)m->num_params, sizeof *c.order, by_name);
  bool ok;
  if (is_dir(path)) {
    char index[4096], single[4096];
    bool fits =
        snprintf(index, sizeof index, "%s/model.safetensors.index.json", path) <
            (int)sizeof index &&
        snprintf(single, sizeof single, "%s/model.safetensors", path) < (int)sizeof single;
    if (!fits)
      ok = fail(&c, path, "the directory's path is too long to name its files");
    else if (exists(index))
      ok = check_index(&c, path, index);
    else if (exists(single))
      ok = check_single(&c, single);
    else
      ok = fail(&c, path, "directory has neither model.safetensors.index.json nor "
                          "model.safetensors");
  } else {
    ok = check_single(&c, path);
  }
  for (int i = 0; i < c.num_files; ++i) {
    srt_safetensors_close(c.files[i]);
    free(c.file_names[i]);
  }
  free(c.files);
  free(c.file_names);
  json_decref(c.weight_map);
  free(c.order);
  return ok;
}
