// Atomic safetensors writer: header via jansson, data streamed, then
// fflush, fsync, rename and a directory fsync. A character device
// (/dev/null) is written in place, a symbolic link written through (the
// file it resolves to is replaced, the link kept); other non-regular paths
// are refused (shardrt/output.h).
#include "shardrt/safetensors_write.h"

#include "shardrt/output.h"
#include "shardrt/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct srt_safetensors_writer {
  FILE *f;
  char *path;     // final path
  char *tmp;      // our own temporary beside it (srt_output_temp)
  size_t n;       // entries
  size_t next;    // next entry to put
  size_t *bytes;  // bytes of each entry
  bool device;    // written in place (a character device), no temporary
  // Each tensor's CRC-32 goes into the header's metadata: written with
  // placeholders first, rewritten in place (same length) at commit.
  json_t *header; // the header object, kept to print it again
  json_t *meta;   // its __metadata__
  char **crc_keys; // "shardrt.crc32.<name>" per entry
  uint32_t *crc;   // per entry, of its data as put
  size_t header_len; // bytes of the printed header (before padding)
};

static srt_status io_error(const char *step, const char *file, int err) {
  return SRT_ERROR(SRT_IO, "safetensors write: %s '%s' failed: %s", step, file,
                   strerror(err));
}

static void destroy(srt_safetensors_writer *w, int remove_tmp) {
  if (!w)
    return;
  if (w->f)
    fclose(w->f);
  if (remove_tmp && w->tmp && !w->device)
    unlink(w->tmp);
  for (size_t i = 0; w->crc_keys && i < w->n; ++i)
    free(w->crc_keys[i]);
  free(w->crc_keys);
  free(w->crc);
  if (w->header)
    json_decref(w->header);
  free(w->path);
  free(w->tmp);
  free(w->bytes);
  free(w);
}

// The header JSON (compact) of `entries`, with data_offsets laid out
// contiguously; fills bytes[i].
// The writer's header object: __metadata__ first (the given pairs, then a
// CRC-32 placeholder per tensor), then the tensors.
static srt_status build_header(srt_safetensors_writer *w, const srt_safetensors_entry *e,
                               size_t n, const char *const *metadata, size_t n_metadata,
                               size_t *bytes, char **out) {
  *out = NULL;
  json_t *root = json_object(), *meta = json_object();
  w->crc_keys = calloc(n ? n : 1, sizeof *w->crc_keys);
  w->crc = calloc(n ? n : 1, sizeof *w->crc);
  if (!root || !meta || !w->crc_keys || !w->crc) {
    json_decref(root);
    json_decref(meta);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "safetensors write: out of memory");
  }
  w->header = root;
  w->meta = meta;
  srt_status s = NULL;
  for (size_t i = 0; i < n_metadata; ++i)
    json_object_set_new(meta, metadata[2 * i], json_string(metadata[2 * i + 1]));
  for (size_t i = 0; i < n && !s; ++i) {
    size_t len = strlen(SRT_CHECKSUM_KEY_PREFIX) + strlen(e[i].name ? e[i].name : "") + 1;
    if (!(w->crc_keys[i] = malloc(len)))
      s = SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "safetensors write: out of memory");
    else
      snprintf(w->crc_keys[i], len, "%s%s", SRT_CHECKSUM_KEY_PREFIX, e[i].name ? e[i].name : "");
    if (!s)
      json_object_set_new(meta, w->crc_keys[i], json_string("00000000"));
  }
  json_object_set_new(root, "__metadata__", meta);
  uint64_t offset = 0;
  for (size_t i = 0; i < n && !s; ++i) {
    const char *name = e[i].name ? e[i].name : "";
    size_t elem = srt_dtype_size(e[i].dtype);
    if (!*name || !strcmp(name, "__metadata__") || json_object_get(root, name)) {
      s = SRT_ERROR(SRT_INVALID_ARGUMENT,
                    "safetensors write: entry %zu has an empty, reserved or "
                    "duplicate name '%s'",
                    i, name);
      break;
    }
    if (!elem || e[i].ndim < 0 || e[i].ndim > SRT_MAX_RANK) {
      s = SRT_ERROR(SRT_INVALID_ARGUMENT,
                    "safetensors write: tensor '%s' has dtype %d and rank %d", name,
                    (int)e[i].dtype, e[i].ndim);
      break;
    }
    json_t *shape = json_array();
    uint64_t numel = 1;
    for (int d = 0; d < e[i].ndim; ++d) {
      if (e[i].shape[d] < 0)
        s = SRT_ERROR(SRT_INVALID_ARGUMENT,
                      "safetensors write: tensor '%s' dim %d has size %lld", name,
                      d, (long long)e[i].shape[d]);
      json_array_append_new(shape, json_integer(e[i].shape[d]));
      numel *= (uint64_t)e[i].shape[d];
    }
    bytes[i] = (size_t)(numel * elem);
    json_t *t = json_object();
    json_object_set_new(t, "dtype", json_string(srt_dtype_name(e[i].dtype)));
    json_object_set_new(t, "shape", shape);
    json_t *off = json_array();
    json_array_append_new(off, json_integer((json_int_t)offset));
    json_array_append_new(off, json_integer((json_int_t)(offset + bytes[i])));
    json_object_set_new(t, "data_offsets", off);
    json_object_set_new(root, name, t);
    offset += bytes[i];
  }
  if (!s) {
    *out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!*out)
      s = SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "safetensors write: cannot print header");
  }
  return s;
}

srt_status srt_safetensors_writer_begin(const char *path,
                                        const srt_safetensors_entry *entries,
                                        size_t n_entries,
                                        const char *const *metadata,
                                        size_t n_metadata,
                                        srt_safetensors_writer **out) {
  *out = NULL;
  srt_safetensors_writer *w = calloc(1, sizeof *w);
  if (!w)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "safetensors write: out of memory");
  // A link is written through: the file it resolves to is replaced.
  bool device = false;
  srt_status d = srt_output_check_seekable("safetensors output", path);
  if (!d)
    d = srt_output_stage("safetensors output", path, &device, &w->path, &w->tmp);
  w->device = device;
  w->bytes = d ? NULL : calloc(n_entries ? n_entries : 1, sizeof *w->bytes);
  if (!d && !w->bytes)
    d = SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "safetensors write: out of memory");
  if (d) {
    destroy(w, 1); // the temporary, when one was made
    return d;
  }
  w->n = n_entries;
  char *header;
  srt_status s = build_header(w, entries, n_entries, metadata, n_metadata, w->bytes,
                              &header);
  if (s) {
    destroy(w, 1);
    return s;
  }
  // Pad with spaces so the data section starts 8-byte aligned.
  size_t hlen = strlen(header), padded = (hlen + 7) / 8 * 8;
  w->header_len = hlen;
  unsigned char len8[8];
  for (int i = 0; i < 8; ++i) // little-endian u64
    len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  w->f = fopen(w->tmp, "wb");
  // Held until the file is closed: a run that clears a killed run's
  // temporaries at its start leaves a locked one alone (train/leftovers.c).
  if (w->f && !w->device)
    (void)flock(fileno(w->f), LOCK_EX | LOCK_NB);
  if (!w->f) {
    s = io_error("creating", w->tmp, errno);
  } else if (fwrite(len8, 1, 8, w->f) != 8 || fwrite(header, 1, hlen, w->f) != hlen ||
             fwrite("       ", 1, padded - hlen, w->f) != padded - hlen) {
    s = io_error("writing the header of", w->tmp, errno);
  }
  free(header);
  if (s) {
    destroy(w, 1);
    return s;
  }
  *out = w;
  return NULL;
}

srt_status srt_safetensors_writer_put(srt_safetensors_writer *w, const void *data) {
  if (w->next >= w->n)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "safetensors write: all %zu tensors of '%s' already written",
                     w->n, w->path);
  size_t b = w->bytes[w->next];
  if (b && fwrite(data, 1, b, w->f) != b)
    return io_error("writing tensor data to", w->tmp, errno);
  w->crc[w->next] = srt_crc32(data, b);
  ++w->next;
  return NULL;
}

// fsync of the directory holding `path`, so that the rename is durable.
static srt_status sync_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
                    : strdup(".");
  if (!dir)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "safetensors write: out of memory");
  srt_status s = NULL;
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    s = io_error("opening the directory", dir, errno);
  else if (fsync(fd) != 0)
    s = io_error("fsync of the directory", dir, errno);
  if (fd >= 0)
    close(fd);
  free(dir);
  return s;
}

// Prints the header again with every tensor's CRC-32 (the same length as
// the placeholders') over the one written at begin.
static srt_status write_checksums(srt_safetensors_writer *w) {
  for (size_t i = 0; i < w->n; ++i) {
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", (unsigned)w->crc[i]);
    json_object_set_new(w->meta, w->crc_keys[i], json_string(hex));
  }
  char *header = json_dumps(w->header, JSON_COMPACT | JSON_PRESERVE_ORDER);
  srt_status s = NULL;
  if (!header)
    s = SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "safetensors write: cannot print header");
  else if (strlen(header) != w->header_len)
    s = SRT_ERROR(SRT_INTERNAL, "safetensors write: the header of '%s' changed length", w->path);
  else if (fflush(w->f) != 0 || fseek(w->f, 8, SEEK_SET) != 0 ||
           fwrite(header, 1, w->header_len, w->f) != w->header_len ||
           fseek(w->f, 0, SEEK_END) != 0)
    s = io_error("writing the checksums of", w->tmp, errno);
  free(header);
  return s;
}

srt_status srt_safetensors_writer_commit(srt_safetensors_writer *w) {
  srt_status s = NULL;
  if (w->next != w->n)
    s = SRT_ERROR(SRT_FAILED_PRECONDITION,
                  "safetensors write: '%s' committed after %zu of %zu tensors",
                  w->path, w->next, w->n);
  else if (!w->device) // a device cannot seek back: no checksums there
    s = write_checksums(w);
  if (!s && fflush(w->f) != 0)
    s = io_error("fflush of", w->tmp, errno);
  else if (!s && !w->device && fsync(fileno(w->f)) != 0)
    s = io_error("fsync of", w->tmp, errno);
  if (s) {
    destroy(w, 1);
    return s;
  }
  FILE *f = w->f;
  w->f = NULL;
  if (fclose(f) != 0)
    s = io_error("closing", w->tmp, errno);
  else if (w->device) {
    destroy(w, 0);
    return NULL;
  } else if (rename(w->tmp, w->path) != 0)
    s = io_error("renaming the temporary file over", w->path, errno);
  if (s) {
    destroy(w, 1);
    return s;
  }
  s = sync_dir(w->path); // the new file is in place; make the rename durable
  destroy(w, 0);
  return s;
}

void srt_safetensors_writer_abort(srt_safetensors_writer *w) { destroy(w, 1); }

srt_status srt_safetensors_write(const char *path,
                                 const srt_safetensors_entry *entries,
                                 size_t n_entries, const char *const *metadata,
                                 size_t n_metadata) {
  srt_safetensors_writer *w;
  SRT_RETURN_IF_ERROR(srt_safetensors_writer_begin(path, entries, n_entries,
                                                   metadata, n_metadata, &w));
  for (size_t i = 0; i < n_entries; ++i) {
    srt_status s = srt_safetensors_writer_put(w, entries[i].data);
    if (s) {
      srt_safetensors_writer_abort(w);
      return s;
    }
  }
  return srt_safetensors_writer_commit(w);
}
