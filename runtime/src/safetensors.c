// The safetensors reader: maps a file, validates its header and every
// tensor's byte range once, then serves tensors by index or name.
#include "shardrt/safetensors.h"

#include <zlib.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct srt_safetensors {
  char *path;
  const unsigned char *map; // the whole file, read-only
  size_t map_size;
  json_t *header;           // owns the tensor names and metadata strings
  json_t *metadata;         // borrowed from header; NULL if absent
  srt_tensor_info *tensors; // sorted by name
  size_t count;
};

static const char kMetadataKey[] = "__metadata__";

int64_t srt_tensor_numel(const srt_tensor_info *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i)
    n *= t->shape[i];
  return n;
}

//===----------------------------------------------------------------------===//
// Header validation
//===----------------------------------------------------------------------===//

#define BAD(...) SRT_ERROR(SRT_DATA_LOSS, __VA_ARGS__)

// Reads a JSON integer in [0, INT64_MAX] into *out.
static bool nonneg_int(const json_t *v, int64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return false;
  *out = (int64_t)json_integer_value(v);
  return true;
}

// Validates one header entry and fills `t` (except `data`).
static srt_status parse_entry(const srt_safetensors *f, const char *name,
                              const json_t *entry, uint64_t data_size,
                              srt_tensor_info *t) {
  const char *path = f->path;
  if (!json_is_object(entry))
    return BAD("%s: tensor '%s': header entry is not a JSON object", path, name);
  t->name = name;

  const json_t *dtype = json_object_get(entry, "dtype");
  if (!json_is_string(dtype))
    return BAD("%s: tensor '%s': missing or non-string 'dtype'", path, name);
  t->dtype = srt_dtype_parse(json_string_value(dtype), json_string_length(dtype));
  if (t->dtype == SRT_DTYPE_COUNT)
    return BAD("%s: tensor '%s': unknown dtype '%s'", path, name,
               json_string_value(dtype));

  const json_t *shape = json_object_get(entry, "shape");
  if (!json_is_array(shape))
    return BAD("%s: tensor '%s': missing or non-array 'shape'", path, name);
  if (json_array_size(shape) > SRT_MAX_RANK)
    return BAD("%s: tensor '%s': rank %zu exceeds the maximum of %d", path,
               name, json_array_size(shape), SRT_MAX_RANK);
  t->rank = (int)json_array_size(shape);
  uint64_t nbytes = srt_dtype_size(t->dtype);
  for (int i = 0; i < t->rank; ++i) {
    if (!nonneg_int(json_array_get(shape, (size_t)i), &t->shape[i]))
      return BAD("%s: tensor '%s': shape[%d] is not a non-negative integer",
                 path, name, i);
    if (__builtin_mul_overflow(nbytes, (uint64_t)t->shape[i], &nbytes))
      return BAD("%s: tensor '%s': shape's byte size overflows 64 bits", path,
                 name);
  }

  const json_t *offs = json_object_get(entry, "data_offsets");
  int64_t begin, end;
  if (!json_is_array(offs) || json_array_size(offs) != 2 ||
      !nonneg_int(json_array_get(offs, 0), &begin) ||
      !nonneg_int(json_array_get(offs, 1), &end))
    return BAD("%s: tensor '%s': 'data_offsets' must be two non-negative "
                  "integers [begin, end]",
               path, name);
  if (end < begin)
    return BAD("%s: tensor '%s': data_offsets [%lld, %lld] end before they begin",
               path, name, (long long)begin, (long long)end);
  if ((uint64_t)end > data_size)
    return SRT_ERROR(SRT_OUT_OF_RANGE,
                     "%s: tensor '%s': data_offsets [%lld, %lld] run past the end "
                     "of the data section (%llu bytes)",
                     path, name, (long long)begin, (long long)end,
                     (unsigned long long)data_size);
  if ((uint64_t)(end - begin) != nbytes) {
    char dims[256];
    size_t n = 0;
    for (int i = 0; i < t->rank && n < sizeof dims; ++i)
      n += (size_t)snprintf(dims + n, sizeof dims - n, "%s%lld", i ? ", " : "",
                            (long long)t->shape[i]);
    dims[n < sizeof dims ? n : sizeof dims - 1] = '\0';
    return BAD("%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes but "
                  "%s [%s] needs %llu",
               path, name, (long long)begin, (long long)end,
               (long long)(end - begin), srt_dtype_name(t->dtype), dims,
               (unsigned long long)nbytes);
  }
  t->offset = (uint64_t)begin;
  t->nbytes = (size_t)nbytes;
  return NULL;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const srt_tensor_info *)a)->name,
                ((const srt_tensor_info *)b)->name);
}

static int by_offset(const void *a, const void *b) {
  const srt_tensor_info *x = *(const srt_tensor_info *const *)a;
  const srt_tensor_info *y = *(const srt_tensor_info *const *)b;
  if (x->offset != y->offset)
    return x->offset < y->offset ? -1 : 1;
  return strcmp(x->name, y->name);
}

// Rejects two non-empty tensors sharing a byte.
static srt_status check_overlaps(const srt_safetensors *f) {
  const srt_tensor_info **order = malloc((f->count + 1) * sizeof *order);
  if (!order)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: out of memory", f->path);
  size_t n = 0;
  for (size_t i = 0; i < f->count; ++i)
    if (f->tensors[i].nbytes > 0)
      order[n++] = &f->tensors[i];
  qsort(order, n, sizeof *order, by_offset);
  srt_status status = NULL;
  for (size_t i = 1; i < n && !status; ++i) {
    const srt_tensor_info *prev = order[i - 1], *cur = order[i];
    if (cur->offset < prev->offset + prev->nbytes)
      status = BAD(
                   "%s: tensors '%s' (bytes %llu..%llu) and '%s' (bytes "
                   "%llu..%llu) overlap",
                   f->path, prev->name, (unsigned long long)prev->offset,
                   (unsigned long long)(prev->offset + prev->nbytes),
                   cur->name, (unsigned long long)cur->offset,
                   (unsigned long long)(cur->offset + cur->nbytes));
  }
  free(order);
  return status;
}

// The 8 bytes of the length field as text, non-printing bytes as \xNN, so
// that a file of another format shows what it is ("SRTTOKS\x00": a token file).
static void length_field_text(const uint8_t *b, char out[33]) {
  char *p = out;
  for (int i = 0; i < 8; ++i) {
    bool plain = b[i] >= 0x20 && b[i] < 0x7f && b[i] != '"' && b[i] != '\\';
    p += snprintf(p, 5, plain ? "%c" : "\\x%02x", b[i]);
  }
}

// Parses and validates the header of the mapped file.
static srt_status parse_header(srt_safetensors *f) {
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | f->map[i];
  if (header_len > SRT_SAFETENSORS_MAX_HEADER) {
    char text[33];
    length_field_text(f->map, text);
    return BAD("%s: header length %llu exceeds the %u-byte limit: not a safetensors file? "
               "(its first 8 bytes read \"%s\")",
               f->path, (unsigned long long)header_len, SRT_SAFETENSORS_MAX_HEADER, text);
  }
  if (header_len > f->map_size - 8)
    return BAD("%s: header length %llu runs past the end of the file (%zu "
                  "bytes, %zu after the length field)",
               f->path, (unsigned long long)header_len, f->map_size,
               f->map_size - 8);

  json_error_t err;
  f->header = json_loadb((const char *)f->map + 8, (size_t)header_len,
                         JSON_REJECT_DUPLICATES, &err);
  if (!f->header)
    return BAD("%s: bad header JSON at header line %d, column %d: %s",
               f->path, err.line, err.column, err.text);
  if (!json_is_object(f->header))
    return BAD("%s: the header is not a JSON object", f->path);

  f->metadata = json_object_get(f->header, kMetadataKey);
  if (f->metadata) {
    if (!json_is_object(f->metadata))
      return BAD("%s: '%s' is not a JSON object", f->path, kMetadataKey);
    const char *key;
    json_t *value;
    json_object_foreach(f->metadata, key, value) {
      if (!json_is_string(value))
        return BAD("%s: '%s' entry '%s' is not a string", f->path,
                   kMetadataKey, key);
    }
  }

  size_t entries = json_object_size(f->header) - (f->metadata ? 1 : 0);
  f->tensors = calloc(entries + 1, sizeof *f->tensors);
  if (!f->tensors)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: out of memory for %zu tensors",
                     f->path, entries);
  uint64_t data_start = 8 + header_len;
  uint64_t data_size = f->map_size - data_start;
  const char *name;
  json_t *entry;
  json_object_foreach(f->header, name, entry) {
    if (!strcmp(name, kMetadataKey))
      continue;
    srt_tensor_info *t = &f->tensors[f->count++];
    SRT_RETURN_IF_ERROR(parse_entry(f, name, entry, data_size, t));
    t->data = f->map + data_start + t->offset;
  }
  qsort(f->tensors, f->count, sizeof *f->tensors, by_name);
  for (size_t i = 1; i < f->count; ++i)
    if (!strcmp(f->tensors[i - 1].name, f->tensors[i].name))
      return BAD("%s: tensor '%s' appears twice", f->path, f->tensors[i].name);
  return check_overlaps(f);
}

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

// Maps `path` into f->map; the descriptor is closed before returning.
static srt_status map_file(srt_safetensors *f) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of
  // waiting for a writer.
  int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return SRT_ERROR(errno == ENOENT ? SRT_NOT_FOUND : SRT_IO,
                     "%s: cannot open: %s", f->path, strerror(errno));
  struct stat st;
  srt_status status = NULL;
  if (fstat(fd, &st) != 0)
    status = SRT_ERROR(SRT_IO, "%s: cannot stat: %s", f->path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    status = SRT_ERROR(SRT_IO, "%s: not a regular file", f->path);
  else if (st.st_size < 8)
    status = BAD("%s: truncated: %lld bytes, but a safetensors file starts "
                    "with an 8-byte header length",
                 f->path, (long long)st.st_size);
  if (!status) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      status = SRT_ERROR(SRT_IO, "%s: cannot map %lld bytes: %s", f->path,
                         (long long)st.st_size, strerror(errno));
    else {
      f->map = p;
      f->map_size = (size_t)st.st_size;
    }
  }
  close(fd);
  return status;
}

uint32_t srt_crc32(const void *data, size_t n) {
  return (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), (const Bytef *)data, n);
}

srt_status srt_safetensors_open(const char *path, srt_safetensors **out) {
  *out = NULL;
  srt_safetensors *f = calloc(1, sizeof *f);
  if (f)
    f->path = strdup(path);
  if (!f || !f->path) {
    free(f);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: out of memory", path);
  }
  srt_status status = map_file(f);
  if (!status)
    status = parse_header(f);
  if (status) {
    srt_safetensors_close(f);
    return status;
  }
  *out = f;
  return NULL;
}

void srt_safetensors_close(srt_safetensors *file) {
  if (!file)
    return;
  if (file->map)
    munmap((void *)file->map, file->map_size);
  json_decref(file->header);
  free(file->tensors);
  free(file->path);
  free(file);
}

const char *srt_safetensors_path(const srt_safetensors *file) {
  return file->path;
}

size_t srt_safetensors_count(const srt_safetensors *file) { return file->count; }

const srt_tensor_info *srt_safetensors_get(const srt_safetensors *file,
                                           size_t i) {
  return i < file->count ? &file->tensors[i] : NULL;
}

const srt_tensor_info *srt_safetensors_lookup(const srt_safetensors *file,
                                              const char *name) {
  srt_tensor_info key = {.name = name};
  return bsearch(&key, file->tensors, file->count, sizeof key, by_name);
}

srt_status srt_safetensors_find(const srt_safetensors *file, const char *name,
                                const srt_tensor_info **out) {
  *out = srt_safetensors_lookup(file, name);
  if (*out)
    return NULL;
  return SRT_ERROR(SRT_NOT_FOUND, "%s: no tensor named '%s' (the file has %zu)",
                   file->path, name, file->count);
}

const char *srt_safetensors_metadata(const srt_safetensors *file,
                                     const char *key) {
  return file->metadata ? json_string_value(json_object_get(file->metadata, key))
                        : NULL;
}
