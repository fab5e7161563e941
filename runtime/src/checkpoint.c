// Checkpoints: slice loading from full safetensors files (converted to
// float32), per-rank and consolidated saves through the atomic writer.
#include "shardrt/checkpoint.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/collectives.h"
#include "shardrt/convert.h"
#include "shardrt/dtensor.h"
#include "shardrt/safetensors_write.h"
#include "slice.h"

static const char *name_of(const srt_tensor *t) { return t->name ? t->name : "?"; }

static const char *placement_str(char *buf, size_t len, srt_placement p) {
  if (p.kind == SRT_SHARD)
    snprintf(buf, len, "Shard(%d)", p.dim);
  else
    snprintf(buf, len, "%s", p.kind == SRT_PARTIAL ? "Partial" : "Replicate");
  return buf;
}

// Checks shared by both loads; finds the stored tensor and checks that its
// shape is `want` (the global or the local shape).
// Element i of a tensor's data as a float (F32, BF16 or F16; other dtypes
// are not checked and read as 0).
static float element(const srt_tensor_info *in, int64_t i) {
  const unsigned char *p = (const unsigned char *)in->data;
  if (in->dtype == SRT_F32) {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, p + 2 * i, 2);
  return in->dtype == SRT_BF16 ? srt_bf16_to_f32(h) : in->dtype == SRT_F16 ? srt_f16_to_f32(h) : 0;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

// What a tensor of the file must pass before any rank uses it: its CRC-32
// where the file records one (our checkpoints do, for every tensor), then
// finite values, and no negative second moment (AdamW's exp_avg_sq would
// give NaN at the next step).
static srt_status verify(const srt_safetensors *file, const srt_tensor_info *in) {
  const char *path = srt_safetensors_path(file);
  char key[1024];
  snprintf(key, sizeof key, "%s%s", SRT_CHECKSUM_KEY_PREFIX, in->name);
  const char *want = srt_safetensors_metadata(file, key);
  if (want) {
    char got[9];
    snprintf(got, sizeof got, "%08x", (unsigned)srt_crc32(in->data, in->nbytes));
    if (strcmp(want, got) != 0)
      return SRT_ERROR(SRT_DATA_LOSS,
                       "checkpoint '%s': tensor '%s' fails its checksum (CRC-32 %s recorded, "
                       "%s read): the file is corrupt",
                       path, in->name, want, got);
  }
  if (in->dtype != SRT_F32 && in->dtype != SRT_BF16 && in->dtype != SRT_F16)
    return NULL;
  bool moment = ends_with(in->name, ".exp_avg_sq");
  int64_t n = (int64_t)(in->nbytes / srt_dtype_size(in->dtype));
  for (int64_t i = 0; i < n; ++i) {
    float v = element(in, i);
    if (!isfinite(v) || (moment && v < 0))
      return SRT_ERROR(SRT_DATA_LOSS,
                       "checkpoint '%s': tensor '%s' has %s %g at element %lld (of %lld)", path,
                       in->name, isfinite(v) ? "a negative second moment" : "a non-finite value",
                       (double)v, (long long)i, (long long)n);
  }
  return NULL;
}

static srt_status prepare_load(const srt_safetensors *file, const char *stored,
                               const int coord[2], const srt_tensor *t, const int64_t *want,
                               const char *which, const srt_tensor_info **info) {
  const char *name = stored, *path = srt_safetensors_path(file);
  if (t->dtype != SRT_F32)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "checkpoint load: tensor '%s' has dtype %s; loads fill F32",
                     name, srt_dtype_name(t->dtype));
  if (!t->data && srt_tensor_local_numel(t) > 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "checkpoint load: tensor '%s' has no data",
                     name);
  for (int a = 0; a < SRT_MESH_NDIMS; ++a)
    if (t->placements[a].kind == SRT_PARTIAL)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "checkpoint load: tensor '%s' is Partial on mesh axis %s",
                       name, a == SRT_MESH_DP ? "dp" : "tp");
  SRT_RETURN_IF_ERROR(srt_safetensors_find(file, name, info));
  const srt_tensor_info *in = *info;
  SRT_RETURN_IF_ERROR(verify(file, in));
  int same = in->rank == t->ndim;
  for (int d = 0; same && d < t->ndim; ++d)
    same = in->shape[d] == want[d];
  if (!same) {
    char a[160], b[160];
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "checkpoint load: tensor '%s' in '%s' has shape %s, expected "
                     "the %s shape %s (rank at dp=%d, tp=%d)",
                     name, path, srt_shape_format(a, sizeof a, in->rank, in->shape), which,
                     srt_shape_format(b, sizeof b, t->ndim, want), coord[0], coord[1]);
  }
  if (in->dtype != SRT_F32 && in->dtype != SRT_BF16 && in->dtype != SRT_F16 &&
      in->dtype != SRT_F64)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "checkpoint load: tensor '%s' in '%s' is %s; F32, BF16, F16 "
                     "and F64 convert to F32",
                     name, path, srt_dtype_name(in->dtype));
  return NULL;
}

typedef struct convert_args {
  const unsigned char *src;
  srt_dtype dtype;
  size_t elem;
  float *dst;
} convert_args;

static void convert_row(int64_t src, int64_t dst, int64_t n, void *arg) {
  convert_args *a = arg;
  // The dtype was checked, so this cannot fail.
  srt_status_free(
      srt_convert_to_f32(a->src + (size_t)src * a->elem, a->dtype, n, a->dst + dst));
}

srt_status srt_checkpoint_load_shard(const srt_safetensors *file,
                                     const srt_mesh *mesh,
                                     const int coord[SRT_MESH_NDIMS],
                                     srt_tensor *t) {
  return srt_checkpoint_load_shard_as(file, name_of(t), mesh, coord, t);
}

srt_status srt_checkpoint_load_shard_as(const srt_safetensors *file, const char *stored,
                                        const srt_mesh *mesh,
                                        const int coord[SRT_MESH_NDIMS], srt_tensor *t) {
  const srt_tensor_info *in;
  SRT_RETURN_IF_ERROR(prepare_load(file, stored, coord, t, t->global_shape, "global", &in));
  int64_t box[SRT_MAX_RANK];
  SRT_RETURN_IF_ERROR(
      srt_local_shape(t->name, t->ndim, t->global_shape, t->placements, mesh, box));
  for (int d = 0; d < t->ndim; ++d)
    if (box[d] != t->local_shape[d])
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "checkpoint load: tensor '%s' has local size %lld on dim %d "
                       "but its placements on this mesh give %lld",
                       name_of(t), (long long)t->local_shape[d], d, (long long)box[d]);
  convert_args args = {in->data, in->dtype, srt_dtype_size(in->dtype), t->data};
  return srt_slice_shard(t, mesh, coord, convert_row, &args);
}

srt_status srt_checkpoint_load_local(const srt_safetensors *file,
                                     const srt_mesh *mesh,
                                     const int coord[SRT_MESH_NDIMS],
                                     srt_tensor *t) {
  char want_mesh[32], want_coord[32];
  snprintf(want_mesh, sizeof want_mesh, "%dx%d", mesh->shape[0], mesh->shape[1]);
  snprintf(want_coord, sizeof want_coord, "%d,%d", coord[0], coord[1]);
  const char *m = srt_safetensors_metadata(file, "shardrt.mesh");
  const char *c = srt_safetensors_metadata(file, "shardrt.coord");
  if (!m || !c || strcmp(m, want_mesh) || strcmp(c, want_coord))
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "checkpoint load: '%s' holds the shards of mesh %s at %s; this "
                     "rank is at %s on mesh %s",
                     srt_safetensors_path(file), m ? m : "(none)", c ? c : "(none)",
                     want_coord, want_mesh);
  const srt_tensor_info *in;
  SRT_RETURN_IF_ERROR(prepare_load(file, name_of(t), coord, t, t->local_shape, "local", &in));
  return srt_convert_to_f32(in->data, in->dtype, srt_tensor_local_numel(t), t->data);
}

// Step count `key` of `file` into *out: -1 when absent; false when written
// but not decimal digits within int64_t.
static bool meta_step(const srt_safetensors *file, const char *key, int64_t *out) {
  const char *v = srt_safetensors_metadata(file, key);
  *out = -1;
  if (!v)
    return true;
  if (!isdigit((unsigned char)*v))
    return false;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (*end || errno == ERANGE || x > SRT_CHECKPOINT_MAX_STEP)
    return false;
  *out = (int64_t)x;
  return true;
}

srt_status srt_checkpoint_read_meta(const srt_safetensors *file,
                                    srt_checkpoint_meta *out) {
  const char *path = srt_safetensors_path(file);
  *out = (srt_checkpoint_meta){NULL, -1, -1};
  static const char *const keys[2] = {"shardrt.step", "shardrt.adam_step"};
  int64_t *slots[2] = {&out->step, &out->adam_step};
  for (int i = 0; i < 2; ++i)
    if (!meta_step(file, keys[i], slots[i]))
      return SRT_ERROR(SRT_DATA_LOSS,
                       "checkpoint '%s': metadata %s is not a step count in [0, %lld]: "
                       "'%.64s'",
                       path, keys[i], (long long)SRT_CHECKPOINT_MAX_STEP,
                       srt_safetensors_metadata(file, keys[i]));
  if (out->adam_step > out->step && out->step >= 0)
    return SRT_ERROR(SRT_DATA_LOSS,
                     "checkpoint '%s': metadata shardrt.adam_step %lld is above shardrt.step "
                     "%lld (AdamW steps at most once per training step)",
                     path, (long long)out->adam_step, (long long)out->step);
  const char *optim = srt_safetensors_metadata(file, "shardrt.optimizer");
  if (!optim)
    return NULL;
  for (int i = 0; i < 2; ++i)
    if (*slots[i] < 0)
      return SRT_ERROR(SRT_DATA_LOSS,
                       "checkpoint '%s': metadata %s is missing (the file names optimizer "
                       "state '%.256s')",
                       path, keys[i], optim);
  // The optimizer file is the checkpoint's sibling, named by a save
  // (basename only): a path out of its directory is refused.
  if (!*optim || strchr(optim, '/') || !strcmp(optim, ".") || !strcmp(optim, "..") ||
      strlen(optim) > 255)
    return SRT_ERROR(SRT_DATA_LOSS,
                     "checkpoint '%s': shardrt.optimizer '%.256s' is not a file name in the "
                     "checkpoint's directory",
                     path, optim);
  out->optimizer = optim;
  return NULL;
}

srt_status srt_checkpoint_shard_path(char *buf, size_t len, const char *prefix,
                                     int rank, int world_size) {
  int n = snprintf(buf, len, "%s-rank%05d-of-%05d.safetensors", prefix, rank,
                   world_size);
  if (n < 0 || (size_t)n >= len)
    return SRT_ERROR(SRT_OUT_OF_RANGE,
                     "checkpoint: shard path for '%s' needs %d bytes, have %zu",
                     prefix, n, len);
  return NULL;
}

// A heap copy of the formatted text (NULL when out of memory).
static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (p) {
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  return p;
}

srt_status srt_checkpoint_save_local(const char *path, const srt_mesh *mesh,
                                     const int coord[SRT_MESH_NDIMS],
                                     const srt_tensor *tensors, size_t n) {
  // Metadata: mesh, coord, then a key and a value per tensor.
  size_t n_meta = 2 + n;
  srt_safetensors_entry *e = calloc(n ? n : 1, sizeof *e);
  char **kv = calloc(2 * n_meta, sizeof *kv);
  int ok = e && kv;
  if (ok) {
    kv[0] = dup_printf("shardrt.mesh");
    kv[1] = dup_printf("%dx%d", mesh->shape[0], mesh->shape[1]);
    kv[2] = dup_printf("shardrt.coord");
    kv[3] = dup_printf("%d,%d", coord[0], coord[1]);
    for (size_t i = 0; i < n; ++i) {
      const srt_tensor *t = &tensors[i];
      char sh[160], p0[32], p1[32];
      kv[4 + 2 * i] = dup_printf("shardrt.tensor.%s", name_of(t));
      kv[5 + 2 * i] = dup_printf("%s dp=%s tp=%s",
                                 srt_shape_format(sh, sizeof sh, t->ndim, t->global_shape),
                                 placement_str(p0, sizeof p0, t->placements[0]),
                                 placement_str(p1, sizeof p1, t->placements[1]));
      e[i] = (srt_safetensors_entry){t->name, t->dtype, t->ndim, t->local_shape,
                                     t->data};
    }
    for (size_t i = 0; i < 2 * n_meta; ++i)
      ok = ok && kv[i];
  }
  srt_status s =
      ok ? srt_safetensors_write(path, e, n, (const char *const *)kv, n_meta)
         : SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint save: out of memory");
  for (size_t i = 0; kv && i < 2 * n_meta; ++i)
    free(kv[i]);
  free(kv);
  free(e);
  return s;
}

srt_status srt_checkpoint_save_consolidated(srt_context *ctx, const char *path,
                                            const srt_tensor *tensors, size_t n) {
  return srt_checkpoint_save_consolidated_meta(ctx, path, tensors, n, NULL, 0);
}

srt_status srt_checkpoint_save_consolidated_meta(srt_context *ctx, const char *path,
                                                 const srt_tensor *tensors, size_t n,
                                                 const char *const *metadata,
                                                 size_t n_metadata) {
  srt_checkpoint_item *items = calloc(n ? n : 1, sizeof *items);
  if (!items)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint save: out of memory");
  for (size_t i = 0; i < n; ++i)
    items[i] = (srt_checkpoint_item){tensors[i].name, tensors[i].dtype, &tensors[i], NULL};
  srt_status s = srt_checkpoint_save_items(ctx, path, items, n, metadata, n_metadata);
  free(items);
  return s;
}

// The bytes of item `it` as stored: a gathered tensor (collective; rank 0
// converts it to the stored dtype) or a carried tensor's own bytes. *out
// is malloc'ed (NULL for a carried tensor, whose bytes are used in place).
static srt_status item_bytes(srt_context *ctx, const srt_checkpoint_item *it, bool root,
                             void **out, const void **bytes) {
  *out = NULL;
  if (!it->tensor) {
    *bytes = it->raw->data;
    return NULL;
  }
  const srt_tensor *t = it->tensor;
  int64_t numel = srt_shape_numel(t->ndim, t->global_shape);
  size_t size = (size_t)numel * srt_dtype_size(t->dtype);
  void *full = malloc(size ? size : 1);
  if (!full)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "checkpoint save: cannot allocate %zu bytes to gather '%s'", size,
                     name_of(t));
  srt_status s = srt_full_tensor(ctx, t, full);
  // Narrowing in place: the stored element is never wider than F32.
  if (!s && root && it->dtype != t->dtype)
    s = srt_convert_from_f32(full, it->dtype, numel, full);
  if (s) {
    free(full);
    return s;
  }
  *out = full;
  *bytes = full;
  return NULL;
}

srt_status srt_checkpoint_save_items(srt_context *ctx, const char *path,
                                     const srt_checkpoint_item *items, size_t n,
                                     const char *const *metadata, size_t n_metadata) {
  srt_group *world = srt_context_group(ctx, SRT_GROUP_WORLD);
  int root = srt_group_rank(world) == 0;
  for (size_t i = 0; i < n; ++i)
    if ((items[i].tensor == NULL) == (items[i].raw == NULL) ||
        (items[i].tensor && (items[i].tensor->dtype != SRT_F32 ||
                             (items[i].dtype != SRT_F32 && items[i].dtype != SRT_BF16 &&
                              items[i].dtype != SRT_F16))))
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "checkpoint save: item '%s' must be an F32 tensor stored as F32, "
                       "BF16 or F16, or a carried tensor", items[i].name);
  srt_safetensors_entry *e = calloc(n ? n : 1, sizeof *e);
  const char **meta = calloc(2 * (n_metadata + 1), sizeof *meta);
  if (!e || !meta) {
    free(e);
    free(meta);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint save: out of memory");
  }
  for (size_t i = 0; i < n; ++i) {
    const srt_checkpoint_item *it = &items[i];
    e[i] = it->tensor ? (srt_safetensors_entry){it->name, it->dtype, it->tensor->ndim,
                                                it->tensor->global_shape, NULL}
                      : (srt_safetensors_entry){it->name, it->raw->dtype, it->raw->rank,
                                                it->raw->shape, NULL};
  }
  meta[0] = "format";
  meta[1] = "pt";
  for (size_t i = 0; i < 2 * n_metadata; ++i)
    meta[2 + i] = metadata[i];
  srt_safetensors_writer *w = NULL;
  srt_status write_status = NULL; // rank 0's writing outcome
  if (root)
    write_status =
        srt_safetensors_writer_begin(path, e, n, (const char *const *)meta, n_metadata + 1, &w);
  free(e);
  free(meta);
  // Every rank takes part in every gather, even after rank 0's write failed,
  // so that nobody waits forever; rank 0 just stops writing.
  srt_status s = NULL;
  for (size_t i = 0; i < n && !s; ++i) {
    void *owned = NULL;
    const void *bytes = NULL;
    s = item_bytes(ctx, &items[i], root, &owned, &bytes);
    if (!s && root && !write_status)
      write_status = srt_safetensors_writer_put(w, bytes);
    free(owned);
  }
  if (root) {
    if (!s && !write_status)
      write_status = srt_safetensors_writer_commit(w);
    else if (w)
      srt_safetensors_writer_abort(w);
  }
  if (s) { // a collective failed (on every rank alike)
    srt_status_free(write_status);
    return s;
  }
  int32_t code = (int32_t)srt_status_code(write_status);
  s = srt_broadcast(world, &code, 1, SRT_I32, 0);
  if (s) {
    srt_status_free(write_status);
    return s;
  }
  if (root)
    return write_status;
  if (code != SRT_OK)
    return SRT_ERROR(SRT_IO, "checkpoint save: rank 0 could not write '%s' (%s)",
                     path, srt_code_name((srt_code)code));
  return NULL;
}
