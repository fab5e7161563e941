// --export DIR: the trained model as a Hugging Face model directory that
// AutoModelForCausalLM.from_pretrained(DIR) loads and --load DIR resumes,
// written beside DIR and swapped in whole.
#define _GNU_SOURCE // renameat2
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrt/checkpoint_source.h"
#include "shardrt/collectives.h"
#include "shardrt/output.h"
#include "train_internal.h"

enum { PATH_LEN = 4096 };

static const char kOptimizer[] = "optimizer.safetensors";

// Files copied from beside the input when present: the tokenizer's, the
// processor's (a multimodal model's) and generation settings.
static const char *const kCopied[] = {
    "tokenizer.json",          "tokenizer_config.json", "tokenizer.model",
    "special_tokens_map.json", "added_tokens.json",     "vocab.json",
    "merges.txt",              "chat_template.jinja",   "chat_template.json",
    "generation_config.json",  "preprocessor_config.json", "processor_config.json"};

// "<dir>/<name>" into buf[PATH_LEN]; false when it does not fit (the
// --export path was checked to leave room for every name written).
static bool join(char *buf, const char *dir, const char *name) {
  int n = snprintf(buf, PATH_LEN, "%s/%s", dir, name);
  return n >= 0 && n < PATH_LEN;
}

//===----------------------------------------------------------------------===//
// Rank 0's file operations
//===----------------------------------------------------------------------===//

// Whether `name` is a file an export writes (and so may remove).
static bool export_file(const char *name) {
  if (!strcmp(name, "config.json") || !strcmp(name, SRT_HF_WEIGHTS_NAME) ||
      !strcmp(name, SRT_HF_INDEX_NAME) || !strcmp(name, kOptimizer))
    return true;
  unsigned a, b;
  char tail[32];
  if (sscanf(name, "model-%5u-of-%5u.safetensor%31s", &a, &b, tail) == 3 && !strcmp(tail, "s"))
    return true;
  for (size_t i = 0; i < sizeof kCopied / sizeof *kCopied; ++i)
    if (!strcmp(name, kCopied[i]))
      return true;
  // A writer's temporary file ("<name>.tmp.XXXXXX", srt_output_temp).
  size_t n = strlen(name), t = strlen(SRT_OUTPUT_TEMP_SUFFIX);
  return n > t && !strncmp(name + n - t, ".tmp.", 5);
}

// Removes the export files of `dir`, then `dir` if it is empty (a folder
// holding anything else stays, with those files). A symbolic link is never
// followed: `dir` must be a folder itself.
static void remove_export(const char *dir) {
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return;
  DIR *d = opendir(dir);
  if (!d)
    return;
  char path[PATH_LEN];
  for (struct dirent *e; (e = readdir(d));)
    if (export_file(e->d_name) && join(path, dir, e->d_name))
      unlink(path);
  closedir(d);
  rmdir(dir);
}

bool train_export_drop_staging(const char *dir) {
  char partial[PATH_LEN];
  struct stat st;
  if (snprintf(partial, sizeof partial, "%s.partial", dir) >= (int)sizeof partial ||
      lstat(partial, &st) != 0 || !S_ISDIR(st.st_mode))
    return false;
  remove_export(partial);
  return lstat(partial, &st) != 0;
}

// What `dir` is: 0 absent, 1 an empty directory, 2 an earlier export (or,
// with staging, a crashed export's staging folder), -1 anything else (its
// description in what[]). Symbolic links are refused, never followed; a
// folder holding a file no export writes is not an export's.
static int classify(const char *dir, bool staging, char *what, size_t len) {
  struct stat st;
  if (lstat(dir, &st) != 0)
    return errno == ENOENT ? 0 : (snprintf(what, len, "not readable: %s", strerror(errno)), -1);
  if (S_ISLNK(st.st_mode))
    return snprintf(what, len, "a symbolic link (give the folder itself)"), -1;
  if (!S_ISDIR(st.st_mode))
    return snprintf(what, len, "not a directory"), -1;
  DIR *d = opendir(dir);
  if (!d)
    return snprintf(what, len, "not readable: %s", strerror(errno)), -1;
  int entries = 0;
  char foreign[256] = "";
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    ++entries;
    if (!export_file(e->d_name) && !foreign[0])
      snprintf(foreign, sizeof foreign, "%s", e->d_name);
  }
  closedir(d);
  if (entries == 0)
    return 1;
  if (foreign[0])
    return snprintf(what, len, "a folder holding '%s', which no export writes", foreign), -1;
  if (staging)
    return 2;
  char optim[PATH_LEN];
  srt_safetensors *f = NULL;
  bool ours = join(optim, dir, kOptimizer) && !srt_safetensors_open(optim, &f) && srt_safetensors_metadata(f, "shardrt.step");
  srt_safetensors_close(f);
  if (ours)
    return 2;
  snprintf(what, len, "a directory that no export wrote (no %s with shardrt.step)", kOptimizer);
  return -1;
}

// fsync of a folder (its entries: the files renamed into it, the swap).
static void sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

// The folder holding `path` ("." when none) into buf[PATH_LEN].
static void parent_of(const char *path, char *buf) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(buf, PATH_LEN, ".");
  else if (slash == path)
    snprintf(buf, PATH_LEN, "/");
  else
    snprintf(buf, PATH_LEN, "%.*s", (int)(slash - path), path);
}

// Writes `len` bytes to `path` (created, fsync'ed).
static srt_status write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return SRT_ERROR(SRT_IO, "export: cannot create '%s': %s", path, strerror(errno));
  const char *p = data;
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, p + done, len - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    done += (size_t)w;
  }
  bool ok = done == len && fsync(fd) == 0;
  int err = errno;
  if (close(fd) != 0 || !ok)
    return SRT_ERROR(SRT_IO, "export: cannot write '%s': %s", path, strerror(ok ? errno : err));
  return NULL;
}

// Copies the regular file `from` to `to` (a missing source: nothing).
static srt_status copy_file(const char *from, const char *to) {
  int fd = open(from, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 30)) {
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  char *buf = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (buf && got < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  srt_status s = !buf ? SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "export: out of memory copying '%s'",
                                  from)
                 : got != (size_t)st.st_size
                     ? SRT_ERROR(SRT_IO, "export: short read of '%s'", from)
                     : write_file(to, buf, got);
  free(buf);
  return s;
}

// Whether the file `path` holds exactly the `len` bytes of `text`.
static bool same_bytes(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  bool same = true;
  size_t i = 0;
  for (int c; same && (c = fgetc(f)) != EOF; ++i)
    same = i < len && (unsigned char)text[i] == (unsigned char)c;
  fclose(f);
  return same && i == len;
}

// <partial>/tokenizer.json from the program (srt_program.tokenizer_json).
// A program compiled with none writes none (a tokenizer.json found beside
// the config only now was never checked against the vocabulary: a warning
// says it is left out). A --load folder's tokenizer.json that differs from
// the compiled one is named in a warning; the compiled one is written.
static srt_status write_tokenizer(const srt_program *p, const char *load_dir,
                                  const char *partial) {
  const char *text = p->tokenizer_json ? p->tokenizer_json : "";
  size_t len = strlen(text);
  char from[PATH_LEN], to[PATH_LEN];
  struct stat st;
  if (!len) {
    const char *slash = p->model ? strrchr(p->model, '/') : NULL;
    if (slash && snprintf(from, sizeof from, "%.*s/tokenizer.json", (int)(slash - p->model),
                          p->model) < (int)sizeof from &&
        stat(from, &st) == 0)
      fprintf(stderr, "train: warning: export: '%s' was not beside the config when this "
              "program was compiled (nothing checked it against the model's vocabulary): "
              "left out of the export; recompile to include it\n", from);
    return NULL;
  }
  if (load_dir && snprintf(from, sizeof from, "%s%s", load_dir[0] ? load_dir : "./",
                           "tokenizer.json") < (int)sizeof from &&
      stat(from, &st) == 0 && !same_bytes(from, text, len))
    fprintf(stderr, "train: warning: export: '%s' differs from the tokenizer.json compiled "
            "into this program (from beside '%s'): the compiled one is written\n", from,
            p->model ? p->model : "the config");
  return join(to, partial, "tokenizer.json")
             ? write_file(to, text, len)
             : SRT_ERROR(SRT_INVALID_ARGUMENT, "export: path too long");
}

// transformers' name of a weights dtype.
static const char *torch_name(srt_dtype d) {
  return d == SRT_BF16 ? "bfloat16" : d == SRT_F16 ? "float16" : "float32";
}

static srt_dtype from_torch_name(const char *name) {
  return !name                       ? SRT_DTYPE_COUNT
         : !strcmp(name, "bfloat16") ? SRT_BF16
         : !strcmp(name, "float16")  ? SRT_F16
         : !strcmp(name, "float32")  ? SRT_F32
                                     : SRT_DTYPE_COUNT;
}

// Sets the dtype keys (torch_dtype, dtype) that `o` writes to `name`;
// returns whether one differed.
static bool set_dtype_keys(json_t *o, const char *name) {
  bool changed = false;
  const char *keys[] = {"torch_dtype", "dtype"};
  for (int i = 0; i < 2; ++i) {
    const char *v = json_string_value(json_object_get(o, keys[i]));
    if (v && strcmp(v, name)) {
      json_object_set_new(o, keys[i], json_string(name));
      changed = true;
    }
  }
  return changed;
}

// config.json: the compiled config's text as it was, unless its dtype keys
// name another dtype than the weights' (then re-serialised with them set:
// from_pretrained's dtype="auto" reads them).
static srt_status write_config(const srt_program *p, const char *path, srt_dtype dtype) {
  const char *text = p->config_json ? p->config_json : "";
  json_t *root = json_loads(text, 0, NULL);
  if (!json_is_object(root)) {
    json_decref(root);
    return SRT_ERROR(SRT_FAILED_PRECONDITION, "export: the program holds no config.json text "
                     "(recompile it with this shard-compile)");
  }
  const char *name = torch_name(dtype);
  bool changed = set_dtype_keys(root, name);
  json_t *text_config = json_object_get(root, "text_config");
  if (json_is_object(text_config))
    changed = set_dtype_keys(text_config, name) || changed;
  if (!json_object_get(root, "torch_dtype") && !json_object_get(root, "dtype")) {
    json_object_set_new(root, "dtype", json_string(name));
    changed = true;
  }
  char *dumped = changed ? json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(root);
  if (changed && !dumped)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "export: out of memory writing '%s'", path);
  srt_status s;
  if (dumped) {
    size_t n = strlen(dumped);
    char *withnl = realloc(dumped, n + 2);
    if (!withnl) {
      free(dumped);
      return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "export: out of memory writing '%s'", path);
    }
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    s = write_file(path, withnl, n + 1);
    free(withnl);
  } else {
    s = write_file(path, text, strlen(text));
  }
  return s;
}

//===----------------------------------------------------------------------===//
// Shards
//===----------------------------------------------------------------------===//

static int64_t stored_bytes(const srt_checkpoint_item *it) {
  if (!it->tensor)
    return (int64_t)it->raw->nbytes;
  return srt_shape_numel(it->tensor->ndim, it->tensor->global_shape) *
         (int64_t)srt_dtype_size(it->dtype);
}

// transformers' split (modeling_utils' sharding): tensors in order, a new
// shard when the next would pass the limit and the current one is not
// empty. first[s] is shard s's first item (first[count] = n).
static size_t plan_shards(const train_weights *w, int64_t limit, size_t *first,
                          int64_t *total) {
  size_t count = 0;
  int64_t size = 0;
  *total = 0;
  for (size_t i = 0; i < w->n; ++i) {
    int64_t b = stored_bytes(&w->items[i]);
    if (i == 0 || (size > 0 && size + b > limit)) {
      first[count++] = i;
      size = 0;
    }
    size += b;
    *total += b;
  }
  first[count] = w->n;
  return count;
}

static void shard_name(char *buf, size_t len, size_t s, size_t count) {
  if (count == 1)
    snprintf(buf, len, "%s", SRT_HF_WEIGHTS_NAME);
  else
    snprintf(buf, len, "model-%05zu-of-%05zu.safetensors", s + 1, count);
}

// model.safetensors.index.json: total_size and every tensor's shard.
static srt_status write_index(const char *path, const train_weights *w, const size_t *first,
                              size_t count, int64_t total) {
  json_t *root = json_object(), *meta = json_object(), *map = json_object();
  json_object_set_new(meta, "total_size", json_integer(total));
  json_object_set_new(root, "metadata", meta);
  char name[64];
  for (size_t s = 0; s < count; ++s) {
    shard_name(name, sizeof name, s, count);
    for (size_t i = first[s]; i < first[s + 1]; ++i)
      json_object_set_new(map, w->items[i].name, json_string(name));
  }
  json_object_set_new(root, "weight_map", map);
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(root);
  if (!text)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "export: out of memory writing '%s'", path);
  srt_status st = write_file(path, text, strlen(text));
  free(text);
  return st;
}

//===----------------------------------------------------------------------===//
// The export
//===----------------------------------------------------------------------===//

// Rank 0's outcome `s` on every rank (rank 0 keeps its message).
static srt_status agree(srt_context *ctx, srt_status s, const char *what) {
  int32_t code = (int32_t)srt_status_code(s);
  srt_status b = srt_broadcast(srt_context_group(ctx, SRT_GROUP_WORLD), &code, 1, SRT_I32, 0);
  if (b) {
    srt_status_free(s);
    return b;
  }
  if (srt_context_rank(ctx) == 0 || code == SRT_OK)
    return s;
  return SRT_ERROR(SRT_IO, "export: rank 0 could not %s (%s)", what,
                   srt_code_name((srt_code)code));
}

// Rank 0's checks of --export DIR and its staging folder DIR.partial.
static srt_status check_export_paths(const char *dir) {
  char what[512], partial[PATH_LEN], parent[PATH_LEN];
  if (snprintf(partial, sizeof partial, "%s.partial", dir) >= (int)sizeof partial)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export '%s': path too long", dir);
  parent_of(dir, parent);
  struct stat st;
  if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode) || access(parent, W_OK | X_OK) != 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export '%s': its parent folder '%s' is not a "
                     "writable folder", dir, parent);
  if (classify(dir, false, what, sizeof what) < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export '%s' is %s: give a new or empty folder, "
                     "or an earlier export", dir, what);
  if (classify(partial, true, what, sizeof what) < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export '%s': its staging folder '%s' is %s: "
                     "move it away", dir, partial, what);
  return NULL;
}

srt_status train_export_check(srt_context *ctx, const char *dir) {
  srt_status s = srt_context_rank(ctx) == 0 ? check_export_paths(dir) : NULL;
  return agree(ctx, s, "check the --export folder");
}

// The weights' dtype: --export-dtype, else the loaded checkpoint's, else the
// config's torch_dtype / dtype, else F32.
static srt_dtype export_dtype(const srt_program *p, const train_options *o,
                              const train_input *in) {
  if (o->export_dtype != SRT_DTYPE_COUNT)
    return o->export_dtype;
  if (in->src)
    return in->dtype == SRT_BF16 || in->dtype == SRT_F16 ? in->dtype : SRT_F32;
  json_t *root = json_loads(p->config_json ? p->config_json : "", 0, NULL);
  srt_dtype d = from_torch_name(json_string_value(json_object_get(root, "torch_dtype")));
  if (d == SRT_DTYPE_COUNT)
    d = from_torch_name(json_string_value(json_object_get(root, "dtype")));
  json_decref(root);
  return d == SRT_DTYPE_COUNT ? SRT_F32 : d;
}

// Rank 0, after the tensors: the index, config.json, the copied files,
// then the swap into place.
// Only tokenizer.json is compiled into the program; the other tokenizer
// and generation files are copied as they are at export time. One changed
// after the program was built may belong to another model: said plainly.
static void warn_if_newer(const char *from, const struct stat *st) {
  struct stat exe;
  if (stat("/proc/self/exe", &exe) == 0 &&
      (st->st_mtim.tv_sec > exe.st_mtim.tv_sec ||
       (st->st_mtim.tv_sec == exe.st_mtim.tv_sec && st->st_mtim.tv_nsec > exe.st_mtim.tv_nsec)))
    fprintf(stderr,
            "train: warning: export: '%s' changed after this program was compiled; copied "
            "as it is now (only tokenizer.json is compiled in): check it belongs to this "
            "model\n",
            from);
}

static srt_status finish(const srt_program *p, const train_options *o, const train_input *in,
                         const char *partial, const train_weights *w, const size_t *first,
                         size_t count, int64_t total, srt_dtype dtype) {
  char path[PATH_LEN], from[PATH_LEN];
  srt_status s = NULL;
  if (count > 1)
    s = join(path, partial, SRT_HF_INDEX_NAME) ? write_index(path, w, first, count, total)
                                               : SRT_ERROR(SRT_INVALID_ARGUMENT, "export: path too long");
  if (!s)
    s = join(path, partial, "config.json") ? write_config(p, path, dtype)
                                           : SRT_ERROR(SRT_INVALID_ARGUMENT, "export: path too long");
  // Beside the loaded checkpoint first, then beside the compiled config.
  char config_dir[PATH_LEN] = "./";
  const char *slash = p->model ? strrchr(p->model, '/') : NULL;
  if (slash && slash - p->model < PATH_LEN - 2) {
    memcpy(config_dir, p->model, (size_t)(slash - p->model) + 1);
    config_dir[slash - p->model + 1] = 0;
  }
  const char *dirs[2] = {in->src ? srt_checkpoint_source_dir(in->src) : NULL, config_dir};
  // tokenizer.json: the one compiled in (checked against the vocabulary
  // then), never whatever lies beside the config now.
  if (!s)
    s = write_tokenizer(p, dirs[0], partial);
  for (size_t i = 0; !s && i < sizeof kCopied / sizeof *kCopied; ++i)
    for (int d = 0; d < 2 && strcmp(kCopied[i], "tokenizer.json"); ++d) {
      struct stat st;
      if (!dirs[d] || snprintf(from, sizeof from, "%s%s", dirs[d][0] ? dirs[d] : "./",
                               kCopied[i]) >= (int)sizeof from ||
          stat(from, &st) != 0)
        continue;
      if (join(path, partial, kCopied[i]))
        s = copy_file(from, path);
      warn_if_newer(from, &st);
      break;
    }
  if (s)
    return s;
  // The swap: one rename exchanges the new folder with the old one (or
  // moves it into place); the old one is then removed.
  sync_dir(partial); // every file's entry on disk before the swap
  struct stat st;
  bool exists = lstat(o->export_dir, &st) == 0;
  if (exists && renameat2(AT_FDCWD, partial, AT_FDCWD, o->export_dir, RENAME_EXCHANGE) != 0)
    return SRT_ERROR(SRT_IO, "export: cannot swap '%s' into '%s': %s", partial, o->export_dir,
                     strerror(errno));
  if (!exists && rename(partial, o->export_dir) != 0)
    return SRT_ERROR(SRT_IO, "export: cannot rename '%s' to '%s': %s", partial, o->export_dir,
                     strerror(errno));
  char parent[PATH_LEN];
  parent_of(o->export_dir, parent);
  sync_dir(parent); // the swap itself
  if (exists)
    remove_export(partial);
  return NULL;
}

// Rank 0's staging folder "<dir>.partial", made anew: the paths checked
// again (a run is long), a crashed export's staging folder removed first.
static srt_status stage_folder(const char *dir, const char *partial) {
  SRT_RETURN_IF_ERROR(check_export_paths(dir));
  remove_export(partial);
  if (mkdir(partial, 0755) != 0)
    return SRT_ERROR(SRT_IO, "export: cannot create '%s': %s", partial, strerror(errno));
  return NULL;
}

// After a failed export: the previous export stays as it was; our staging
// folder goes (when the paths are still ours to touch).
static void drop_staging(const char *dir, const char *partial) {
  srt_status again = check_export_paths(dir);
  if (!again)
    remove_export(partial);
  srt_status_free(again);
}

srt_status train_export(srt_context *ctx, const srt_program *p, uint8_t *arena,
                        const train_options *o, const train_state *state,
                        const train_input *in) {
  int32_t bad;
  SRT_RETURN_IF_ERROR(train_first_non_finite(ctx, p, arena, &bad));
  if (bad >= 0)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "export: parameter '%s' has non-finite values at step %lld: not "
                     "exporting, '%s' is left as it was", p->params[bad].name,
                     (long long)state->step, o->export_dir);
  // This export's own id, in its weights and its optimizer file: forks of
  // one run share the run id and the steps, and must not pair across forks.
  char save_id[TRAIN_RUN_ID_LEN + 1];
  SRT_RETURN_IF_ERROR(train_run_id_mint(ctx, save_id));
  bool root = srt_context_rank(ctx) == 0;
  char partial[PATH_LEN];
  snprintf(partial, sizeof partial, "%s.partial", o->export_dir);
  srt_status s = root ? stage_folder(o->export_dir, partial) : NULL;
  SRT_RETURN_IF_ERROR(agree(ctx, s, "create the export folder"));

  srt_dtype dtype = export_dtype(p, o, in);
  train_weights w;
  SRT_RETURN_IF_ERROR(train_weights_collect(p, arena, in, dtype, &w));
  size_t *first = calloc(w.n + 2, sizeof *first);
  if (!first) {
    train_weights_free(&w);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "export: out of memory");
  }
  int64_t total;
  size_t count = plan_shards(&w, o->max_shard_bytes, first, &total);
  char step_s[32], adam_s[32], path[PATH_LEN], name[64];
  snprintf(step_s, sizeof step_s, "%" PRId64, state->step);
  snprintf(adam_s, sizeof adam_s, "%" PRId64, state->adam_step);
  char batch_s[32], seq_s[32]; // the data windows: a resume checks them
  snprintf(batch_s, sizeof batch_s, "%" PRId64, p->batch);
  snprintf(seq_s, sizeof seq_s, "%" PRId64, p->seq);
  const char *wmeta[] = {"shardrt.step",        step_s,     "shardrt.adam_step", adam_s,
                         "shardrt.optimizer",   kOptimizer, "shardrt.model",
                         p->model ? p->model : "", "shardrt.lr_schedule", state->lr_schedule,
                         "shardrt.run",         state->run_id,
                         "shardrt.save",        save_id,
                         "shardrt.batch", batch_s, "shardrt.seq", seq_s};
  for (size_t k = 0; k < count && !s; ++k) {
    shard_name(name, sizeof name, k, count);
    if (!join(path, partial, name))
      s = SRT_ERROR(SRT_INVALID_ARGUMENT, "export: path too long");
    else
      s = srt_checkpoint_save_items(ctx, path, w.items + first[k], first[k + 1] - first[k], wmeta,
                                  (int)(sizeof wmeta / sizeof *wmeta / 2));
  }
  if (!s) {
    const char *ometa[] = {"shardrt.step",    step_s,
                           "shardrt.adam_step", adam_s,
                           "shardrt.weights", count > 1 ? SRT_HF_INDEX_NAME : SRT_HF_WEIGHTS_NAME,
                           "shardrt.model",   p->model ? p->model : "",
                           "shardrt.lr_schedule", state->lr_schedule,
                           "shardrt.run",     state->run_id,
                           "shardrt.save",    save_id};
    s = join(path, partial, kOptimizer) ? train_save_moments(ctx, p, arena, path, ometa, 7)
                                        : SRT_ERROR(SRT_INVALID_ARGUMENT, "export: path too long");
  }
  if (!s) {
    srt_status f = root ? finish(p, o, in, partial, &w, first, count, total, dtype) : NULL;
    s = agree(ctx, f, "finish the export");
  }
  if (s && root)
    drop_staging(o->export_dir, partial);
  free(first);
  train_weights_free(&w);
  return s;
}
