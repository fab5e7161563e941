// Token files (shardrt/tokens.h): validated read-only mapping, the vocabulary
// check, deterministic step batching and the atomic writer.
#include "shardrt/tokens.h"

#include "shardrt/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char kMagic[8] = {'S', 'R', 'T', 'T', 'O', 'K', 'S', '\0'};

struct srt_tokens {
  char *path;
  int fd;          // read with pread: a file truncated under the run gives a
                   // short read (an error), where a mapping gave SIGBUS
  int64_t bytes;   // the file's size when opened
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
  if (t->fd >= 0)
    close(t->fd);
  free(t->path);
  free(t);
}

// Reads `n` bytes at file offset `at` into buf. Errors: SRT_DATA_LOSS when
// the file no longer holds them (naming its size now and when opened).
static srt_status read_at(const srt_tokens *t, void *buf, size_t n, int64_t at) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(t->fd, (char *)buf + got, n - got, (off_t)(at + (int64_t)got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return SRT_ERROR(SRT_IO, "token file '%s': read failed: %s", t->path, strerror(errno));
    if (r == 0) {
      struct stat st;
      long long now = fstat(t->fd, &st) == 0 ? (long long)st.st_size : -1;
      return SRT_ERROR(SRT_DATA_LOSS,
                       "token file '%s' is %lld bytes now, %lld when it was opened: it was "
                       "truncated or rewritten during the run",
                       t->path, now, (long long)t->bytes);
    }
    got += (size_t)r;
  }
  return NULL;
}

srt_status srt_tokens_open(const char *path, srt_tokens **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); // a FIFO: refused, not waited on
  if (fd < 0)
    return SRT_ERROR(errno == ENOENT ? SRT_NOT_FOUND : SRT_IO,
                     "token file '%s': cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return SRT_ERROR(SRT_IO, "token file '%s': cannot stat: %s", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "token file '%s' is not a regular file", path);
  }
  size_t size = (size_t)st.st_size;
  if (size < SRT_TOKENS_HEADER_BYTES) {
    close(fd);
    return SRT_ERROR(SRT_DATA_LOSS,
                     "token file '%s': %zu bytes, shorter than the %d-byte header", path,
                     size, SRT_TOKENS_HEADER_BYTES);
  }
  srt_tokens *t = calloc(1, sizeof *t);
  char *name = malloc(strlen(path) + 1);
  if (!t || !name) {
    close(fd);
    free(t);
    free(name);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory", path);
  }
  strcpy(name, path);
  *t = (srt_tokens){.path = name, .fd = fd, .bytes = (int64_t)size};
  unsigned char h[SRT_TOKENS_HEADER_BYTES];
  srt_status s = read_at(t, h, sizeof h, 0);
  if (s) {
    srt_tokens_close(t);
    return s;
  }
  uint64_t version = load_le(h + 8, 2), width = load_le(h + 10, 2);
  uint64_t count = load_le(h + 16, 8), vocab = load_le(h + 24, 8);
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
  t->count = (int64_t)count;
  t->vocab = (int64_t)vocab;
  t->width = (int)width;
  *out = t;
  return NULL;
}

int64_t srt_tokens_count(const srt_tokens *t) { return t->count; }
int64_t srt_tokens_vocab(const srt_tokens *t) { return t->vocab; }

// Byte offset of token i.
static int64_t offset_of(const srt_tokens *t, int64_t i) {
  return SRT_TOKENS_HEADER_BYTES + i * t->width;
}

int64_t srt_tokens_at(const srt_tokens *t, int64_t i) {
  unsigned char b[4];
  srt_status s = read_at(t, b, (size_t)t->width, offset_of(t, i));
  if (s) {
    srt_status_free(s);
    return -1;
  }
  return (int64_t)load_le(b, t->width);
}

srt_status srt_tokens_check_vocab(const srt_tokens *t, int64_t vocab) {
  enum { kChunk = 1 << 16 };
  // On the heap: 256 KiB on the stack overflowed a main thread whose stack
  // limit was that small (ulimit -s 256) with a segmentation fault.
  unsigned char *buf = malloc((size_t)kChunk * 4);
  if (!buf)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory", t->path);
  srt_status s = NULL;
  for (int64_t i0 = 0; !s && i0 < t->count; i0 += kChunk) {
    int64_t n = t->count - i0 < kChunk ? t->count - i0 : kChunk;
    s = read_at(t, buf, (size_t)(n * t->width), offset_of(t, i0));
    for (int64_t i = 0; !s && i < n; ++i) {
      int64_t id = (int64_t)load_le(buf + i * t->width, t->width);
      if (id >= vocab)
        s = SRT_ERROR(SRT_OUT_OF_RANGE,
                      "token file '%s': token %lld has id %lld, not below the model's "
                      "vocabulary of %lld (file declares vocabulary %lld)",
                      t->path, (long long)(i0 + i), (long long)id, (long long)vocab,
                      (long long)t->vocab);
    }
  }
  free(buf);
  return s;
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
  unsigned char *row = malloc((size_t)(seq * t->width));
  if (!row)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token batch: out of memory");
  srt_status s = NULL;
  for (int64_t r = 0; r < rows && !s; ++r) {
    int64_t start = (((step - 1) * batch + row0 + r) * seq) % positions;
    s = read_at(t, row, (size_t)(seq * t->width), offset_of(t, start));
    for (int64_t k = 0; k < seq && !s; ++k)
      ids[r * seq + k] = (int64_t)load_le(row + k * t->width, t->width);
  }
  free(row);
  return s;
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
  size_t bytes = SRT_TOKENS_HEADER_BYTES + (size_t)count * (size_t)width;
  unsigned char *h = calloc(1, bytes);
  if (!h)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory (%zu bytes)", path,
                     bytes);
  memcpy(h, kMagic, sizeof kMagic);
  store_le(h + 8, SRT_TOKENS_VERSION, 2);
  store_le(h + 10, (uint64_t)width, 2);
  store_le(h + 16, (uint64_t)count, 8);
  store_le(h + 24, (uint64_t)vocab, 8);
  for (int64_t i = 0; i < count; ++i)
    store_le(h + SRT_TOKENS_HEADER_BYTES + i * width, (uint64_t)tokens[i], width);
  srt_status s = srt_write_file("token file", path, h, bytes);
  free(h);
  return s;
}
