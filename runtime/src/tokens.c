// Token files (shardrt/tokens.h): validated read-only mapping, the vocabulary
// check, deterministic step batching and the atomic writer.
#include "shardrt/tokens.h"

#include "shardrt/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char kMagic[8] = {'S', 'R', 'T', 'T', 'O', 'K', 'S', '\0'};

struct srt_tokens {
  char *path;
  const unsigned char *map; // whole file
  size_t map_bytes;
  const unsigned char *data; // first token
  int64_t count, vocab;
  int width; // bytes per token
};

static uint64_t load_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = v << 8 | p[i];
  return v;
}

static void store_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i, v >>= 8)
    p[i] = (unsigned char)(v & 0xff);
}

void srt_tokens_close(srt_tokens *t) {
  if (!t)
    return;
  if (t->map)
    munmap((void *)t->map, t->map_bytes);
  free(t->path);
  free(t);
}

srt_status srt_tokens_open(const char *path, srt_tokens **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return SRT_ERROR(errno == ENOENT ? SRT_NOT_FOUND : SRT_IO,
                     "token file '%s': cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return SRT_ERROR(SRT_IO, "token file '%s': cannot stat: %s", path, strerror(err));
  }
  size_t size = (size_t)st.st_size;
  if (size < SRT_TOKENS_HEADER_BYTES) {
    close(fd);
    return SRT_ERROR(SRT_DATA_LOSS,
                     "token file '%s': %zu bytes, shorter than the %d-byte header", path,
                     size, SRT_TOKENS_HEADER_BYTES);
  }
  void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd);
  if (map == MAP_FAILED)
    return SRT_ERROR(SRT_IO, "token file '%s': cannot map: %s", path, strerror(err));
  srt_tokens *t = calloc(1, sizeof *t);
  char *name = malloc(strlen(path) + 1);
  if (!t || !name) {
    munmap(map, size);
    free(t);
    free(name);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory", path);
  }
  strcpy(name, path);
  *t = (srt_tokens){.path = name, .map = map, .map_bytes = size};
  const unsigned char *h = map;
  uint64_t version = load_le(h + 8, 2), width = load_le(h + 10, 2);
  uint64_t count = load_le(h + 16, 8), vocab = load_le(h + 24, 8);
  srt_status s = NULL;
  if (memcmp(h, kMagic, sizeof kMagic) != 0)
    s = SRT_ERROR(SRT_DATA_LOSS,
                  "token file '%s': not a token file (magic is not \"SRTTOKS\"; make one "
                  "with shard-tokens)",
                  path);
  else if (version != SRT_TOKENS_VERSION)
    s = SRT_ERROR(SRT_DATA_LOSS, "token file '%s': version %llu, this runtime reads %d",
                  path, (unsigned long long)version, SRT_TOKENS_VERSION);
  else if (width != 1 && width != 2 && width != 4)
    s = SRT_ERROR(SRT_DATA_LOSS, "token file '%s': %llu bytes per token, not 1, 2 or 4",
                  path, (unsigned long long)width);
  else if (count > (uint64_t)(size - SRT_TOKENS_HEADER_BYTES) / width ||
           SRT_TOKENS_HEADER_BYTES + count * width != size)
    s = SRT_ERROR(SRT_DATA_LOSS,
                  "token file '%s': header says %llu tokens of %llu bytes, but the file has "
                  "%zu bytes after the header",
                  path, (unsigned long long)count, (unsigned long long)width,
                  size - SRT_TOKENS_HEADER_BYTES);
  else if (vocab == 0 || vocab > ((uint64_t)1 << 32))
    s = SRT_ERROR(SRT_DATA_LOSS, "token file '%s': vocabulary size %llu outside [1, 2^32]",
                  path, (unsigned long long)vocab);
  if (s) {
    srt_tokens_close(t);
    return s;
  }
  t->data = h + SRT_TOKENS_HEADER_BYTES;
  t->count = (int64_t)count;
  t->vocab = (int64_t)vocab;
  t->width = (int)width;
  *out = t;
  return NULL;
}

int64_t srt_tokens_count(const srt_tokens *t) { return t->count; }
int64_t srt_tokens_vocab(const srt_tokens *t) { return t->vocab; }

int64_t srt_tokens_at(const srt_tokens *t, int64_t i) {
  return (int64_t)load_le(t->data + (size_t)i * (size_t)t->width, t->width);
}

srt_status srt_tokens_check_vocab(const srt_tokens *t, int64_t vocab) {
  for (int64_t i = 0; i < t->count; ++i) {
    int64_t id = srt_tokens_at(t, i);
    if (id >= vocab)
      return SRT_ERROR(SRT_OUT_OF_RANGE,
                       "token file '%s': token %lld has id %lld, not below the model's "
                       "vocabulary of %lld (file declares vocabulary %lld)",
                       t->path, (long long)i, (long long)id, (long long)vocab,
                       (long long)t->vocab);
  }
  return NULL;
}

srt_status srt_tokens_batch(const srt_tokens *t, int64_t step, int64_t batch, int64_t seq,
                            int64_t row0, int64_t rows, int64_t *ids) {
  if (step < 1 || batch <= 0 || seq <= 0 || row0 < 0 || rows < 0 || row0 + rows > batch)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "token batch: step %lld, batch %lld, seq %lld, rows [%lld, %lld) "
                     "(need step >= 1 and rows within the batch)",
                     (long long)step, (long long)batch, (long long)seq, (long long)row0,
                     (long long)(row0 + rows));
  if (t->count < seq)
    return SRT_ERROR(SRT_OUT_OF_RANGE,
                     "token file '%s': %lld tokens, fewer than one sequence of %lld", t->path,
                     (long long)t->count, (long long)seq);
  int64_t positions = t->count - seq + 1;
  if (step - 1 > INT64_MAX / batch / seq - 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "token batch: step %lld x batch %lld x seq %lld overflows int64",
                     (long long)step, (long long)batch, (long long)seq);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t start = (((step - 1) * batch + row0 + r) * seq) % positions;
    for (int64_t s = 0; s < seq; ++s)
      ids[r * seq + s] = srt_tokens_at(t, start + s);
  }
  return NULL;
}

srt_status srt_tokens_write(const char *path, const int64_t *tokens, int64_t count,
                            int64_t vocab) {
  if (vocab < 1 || vocab > ((int64_t)1 << 32) || count < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "token file '%s': vocabulary %lld outside [1, 2^32] or count %lld < 0",
                     path, (long long)vocab, (long long)count);
  for (int64_t i = 0; i < count; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "token file '%s': token %lld has id %lld outside [0, %lld)", path,
                       (long long)i, (long long)tokens[i], (long long)vocab);
  int width = vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4;
  // A new or regular file is written to a temporary and renamed over the
  // path; a character device (/dev/null) in place.
  srt_output_kind kind;
  SRT_RETURN_IF_ERROR(srt_output_kind_of("token file", path, &kind));
  bool device = kind == SRT_OUTPUT_DEVICE;
  size_t len = strlen(path) + 5;
  char *tmp = malloc(len);
  if (!tmp)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory", path);
  snprintf(tmp, len, device ? "%s" : "%s.tmp", path);
  srt_status s = NULL;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    s = SRT_ERROR(SRT_IO, "token file '%s': cannot create: %s", tmp, strerror(errno));
    free(tmp);
    return s;
  }
  unsigned char h[SRT_TOKENS_HEADER_BYTES] = {0};
  memcpy(h, kMagic, sizeof kMagic);
  store_le(h + 8, SRT_TOKENS_VERSION, 2);
  store_le(h + 10, (uint64_t)width, 2);
  store_le(h + 16, (uint64_t)count, 8);
  store_le(h + 24, (uint64_t)vocab, 8);
  int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
  unsigned char buf[4096];
  size_t at = 0;
  for (int64_t i = 0; ok && i < count; ++i) {
    store_le(buf + at, (uint64_t)tokens[i], width);
    at += (size_t)width;
    if (at + 4 > sizeof buf || i + 1 == count) {
      ok = fwrite(buf, 1, at, f) == at;
      at = 0;
    }
  }
  ok = ok && fflush(f) == 0 && (device || fsync(fileno(f)) == 0);
  int err = errno;
  if (fclose(f) != 0 && ok) {
    ok = 0;
    err = errno;
  }
  if (ok && !device && rename(tmp, path) != 0) {
    ok = 0;
    err = errno;
  }
  if (!ok) {
    s = SRT_ERROR(SRT_IO, "token file '%s': write failed: %s", path, strerror(err));
    if (!device)
      remove(tmp);
  }
  free(tmp);
  return s;
}
