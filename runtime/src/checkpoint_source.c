// Opening a checkpoint of one file or of shards listed by an index, and the
// merged, name-sorted view of its tensors.
#include "shardrt/checkpoint_source.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_LEN = 4096 };

// A real index is under 1 MiB; 64 MiB bounds a wrong file.
static const size_t kMaxIndexBytes = (size_t)64 << 20;

typedef struct entry {
  const srt_tensor_info *info;
  const srt_safetensors *file;
} entry;

struct srt_checkpoint_source {
  char *path;
  char dir[PATH_LEN];
  bool sharded;
  srt_safetensors **files;
  size_t num_files;
  entry *entries; // sorted by name
  size_t num_entries;
};

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

// The whole of a regular file of at most kMaxIndexBytes, NUL-terminated.
static srt_status read_small_file(const char *path, char **out, size_t *len) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return SRT_ERROR(errno == ENOENT ? SRT_NOT_FOUND : SRT_IO, "%s: %s", path,
                     strerror(errno));
  struct stat st = {0};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > kMaxIndexBytes) {
    const char *is = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISREG(st.st_mode)  ? "too large"
                                            : "not a regular file";
    close(fd);
    return SRT_ERROR(SRT_DATA_LOSS, "%s: the index is %s (a regular file of at most %zu bytes "
                     "is read)", path, is, kMaxIndexBytes);
  }
  char *text = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (text && got < (size_t)st.st_size) {
    ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  if (!text)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: out of memory", path);
  if (got != (size_t)st.st_size) {
    free(text);
    return SRT_ERROR(SRT_IO, "%s: short read", path);
  }
  text[got] = 0;
  *out = text;
  *len = got;
  return NULL;
}

static srt_status add_file(srt_checkpoint_source *s, const char *path, size_t *index) {
  for (size_t i = 0; i < s->num_files; ++i)
    if (!strcmp(srt_safetensors_path(s->files[i]), path)) {
      *index = i;
      return NULL;
    }
  srt_safetensors **files = realloc(s->files, (s->num_files + 1) * sizeof *files);
  if (!files)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: out of memory", s->path);
  s->files = files;
  SRT_RETURN_IF_ERROR(srt_safetensors_open(path, &s->files[s->num_files]));
  *index = s->num_files++;
  return NULL;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const entry *)a)->info->name, ((const entry *)b)->info->name);
}

// The merged tensor list; a name held by two files is an error.
static srt_status collect(srt_checkpoint_source *s) {
  size_t n = 0;
  for (size_t i = 0; i < s->num_files; ++i)
    n += srt_safetensors_count(s->files[i]);
  s->entries = calloc(n ? n : 1, sizeof *s->entries);
  if (!s->entries)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: out of memory", s->path);
  for (size_t i = 0; i < s->num_files; ++i)
    for (size_t j = 0; j < srt_safetensors_count(s->files[i]); ++j)
      s->entries[s->num_entries++] = (entry){srt_safetensors_get(s->files[i], j), s->files[i]};
  qsort(s->entries, s->num_entries, sizeof *s->entries, by_name);
  for (size_t i = 1; i < s->num_entries; ++i)
    if (!strcmp(s->entries[i].info->name, s->entries[i - 1].info->name))
      return SRT_ERROR(SRT_DATA_LOSS, "%s: tensor '%s' is in both '%s' and '%s'",
                       s->path, s->entries[i].info->name,
                       srt_safetensors_path(s->entries[i - 1].file),
                       srt_safetensors_path(s->entries[i].file));
  return NULL;
}

// Every shard the index names, each listed tensor where the map says, and
// no shard tensor the map leaves out.
static srt_status open_index(srt_checkpoint_source *s, const char *index_path) {
  char *text;
  size_t len = 0;
  SRT_RETURN_IF_ERROR(read_small_file(index_path, &text, &len));
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (!root)
    return SRT_ERROR(SRT_DATA_LOSS, "%s: malformed JSON at line %d, "
                     "column %d: %s", index_path, jerr.line, jerr.column, jerr.text);
  json_t *map = json_object_get(root, "weight_map");
  srt_status st = NULL;
  if (!json_is_object(map))
    st = SRT_ERROR(SRT_DATA_LOSS, "%s: missing or non-object key "
                   "'weight_map'", index_path);
  const char *name;
  json_t *value;
  size_t listed = 0;
  json_object_foreach(map, name, value) {
    if (st)
      break;
    const char *file = json_string_value(value);
    char path[PATH_LEN];
    size_t fi;
    if (!file || !file[0] || strchr(file, '/') || !strcmp(file, ".") || !strcmp(file, ".."))
      st = SRT_ERROR(SRT_DATA_LOSS, "%s: weight_map entry '%s' must be a "
                     "file name in the same directory", index_path, name);
    else if (snprintf(path, sizeof path, "%s%s", s->dir, file) >= (int)sizeof path)
      st = SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: the path of shard '%s' is "
                     "too long", index_path, file);
    else if (!(st = add_file(s, path, &fi)) && !srt_safetensors_lookup(s->files[fi], name))
      st = SRT_ERROR(SRT_DATA_LOSS, "%s: weight_map puts tensor '%s' in "
                     "'%s', which has no such tensor", index_path, name, file);
    ++listed;
  }
  for (size_t i = 0; i < s->num_files && !st; ++i)
    for (size_t j = 0; j < srt_safetensors_count(s->files[i]) && !st; ++j) {
      const char *t = srt_safetensors_get(s->files[i], j)->name;
      const char *where = json_string_value(json_object_get(map, t));
      const char *base = strrchr(srt_safetensors_path(s->files[i]), '/');
      base = base ? base + 1 : srt_safetensors_path(s->files[i]);
      if (!where || strcmp(where, base))
        st = SRT_ERROR(SRT_DATA_LOSS, "%s: holds tensor '%s', which %s lists %s%s",
                       srt_safetensors_path(s->files[i]), t, index_path,
                       where ? "in " : "nowhere", where ? where : "");
    }
  json_decref(root);
  if (!st && listed == 0)
    st = SRT_ERROR(SRT_DATA_LOSS, "%s: weight_map is empty", index_path);
  return st;
}

static srt_status open_source(srt_checkpoint_source *s, const char *path) {
  char index[PATH_LEN], single[PATH_LEN];
  if (is_dir(path)) {
    size_t n = strlen(path);
    if (snprintf(s->dir, sizeof s->dir, "%s%s", path, n && path[n - 1] == '/' ? "" : "/") >=
            (int)sizeof s->dir ||
        snprintf(index, sizeof index, "%s%s", s->dir, SRT_HF_INDEX_NAME) >= (int)sizeof index ||
        snprintf(single, sizeof single, "%s%s", s->dir, SRT_HF_WEIGHTS_NAME) >=
            (int)sizeof single)
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: path too long", path);
    if (exists(index)) {
      s->sharded = true;
      return open_index(s, index);
    }
    if (!exists(single))
      return SRT_ERROR(SRT_NOT_FOUND, "%s: directory has neither %s nor %s",
                       path, SRT_HF_INDEX_NAME, SRT_HF_WEIGHTS_NAME);
    size_t fi;
    return add_file(s, single, &fi);
  }
  const char *slash = strrchr(path, '/');
  size_t dn = slash ? (size_t)(slash - path + 1) : 0;
  if (dn >= sizeof s->dir)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: path too long", path);
  memcpy(s->dir, path, dn);
  s->dir[dn] = 0;
  if (ends_with(path, ".json")) {
    s->sharded = true;
    return open_index(s, path);
  }
  size_t fi;
  return add_file(s, path, &fi);
}

srt_status srt_checkpoint_source_open(const char *path, srt_checkpoint_source **out) {
  *out = NULL;
  srt_checkpoint_source *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: out of memory", path);
  }
  srt_status st = open_source(s, path);
  if (!st)
    st = collect(s);
  if (st) {
    srt_checkpoint_source_close(s);
    return st;
  }
  *out = s;
  return NULL;
}

void srt_checkpoint_source_close(srt_checkpoint_source *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->num_files; ++i)
    srt_safetensors_close(s->files[i]);
  free(s->files);
  free(s->entries);
  free(s->path);
  free(s);
}

const char *srt_checkpoint_source_path(const srt_checkpoint_source *s) { return s->path; }

const char *srt_checkpoint_source_dir(const srt_checkpoint_source *s) { return s->dir; }

bool srt_checkpoint_source_sharded(const srt_checkpoint_source *s) { return s->sharded; }

const srt_safetensors *srt_checkpoint_source_first(const srt_checkpoint_source *s) {
  return s->files[0];
}

size_t srt_checkpoint_source_count(const srt_checkpoint_source *s) { return s->num_entries; }

const srt_tensor_info *srt_checkpoint_source_get(const srt_checkpoint_source *s, size_t i,
                                                 const srt_safetensors **file) {
  if (i >= s->num_entries)
    return NULL;
  if (file)
    *file = s->entries[i].file;
  return s->entries[i].info;
}

const srt_tensor_info *srt_checkpoint_source_lookup(const srt_checkpoint_source *s,
                                                    const char *name,
                                                    const srt_safetensors **file) {
  size_t lo = 0, hi = s->num_entries;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(s->entries[mid].info->name, name);
    if (c == 0) {
      if (file)
        *file = s->entries[mid].file;
      return s->entries[mid].info;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}
