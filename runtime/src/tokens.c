// Token files (shardrt/tokens.h): validated reading (version 1; version 2
// with its tokenizer identity and document index), the vocabulary check,
// deterministic windowed step batching and the atomic writers.
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
  int width;            // bytes per token
  int version;          // 1 or 2
  int64_t data;         // byte offset of token 0
  int64_t documents;    // version 2: the index (starts: documents + 1, prompts: documents)
  int64_t *starts, *prompts;
  srt_tokenizer_identity tokenizer; // version 2; name owned here
};

uint64_t srt_tokenizer_digest(const void *bytes, size_t n) {
  const unsigned char *b = bytes;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// Version 2: the byte offset of token 0 after the fixed fields, the name
// (padded to 8 bytes) and the index of `documents` documents.
static uint64_t v2_data_offset(uint64_t name_len, uint64_t documents) {
  return SRT_TOKENS_HEADER_BYTES + SRT_TOKENS_V2_FIXED_BYTES + (name_len + 7) / 8 * 8 +
         (2 * documents + 1) * 8;
}

// Checks a document index against the token count (both versions of the
// rule: open refuses with DATA_LOSS, the writer with INVALID_ARGUMENT).
static srt_status check_index(const char *path, srt_code code, const int64_t *starts,
                              const int64_t *prompts, int64_t documents, int64_t count) {
  if (starts[0] != 0)
    return SRT_ERROR(code, "token file '%s': document 0 starts at token %lld, not 0", path,
                     (long long)starts[0]);
  for (int64_t d = 0; d < documents; ++d) {
    if (starts[d + 1] <= starts[d])
      return SRT_ERROR(code,
                       "token file '%s': document %lld starts at token %lld and document %lld "
                       "at %lld: documents must be non-empty, in order and not overlap",
                       path, (long long)d, (long long)starts[d], (long long)d + 1,
                       (long long)starts[d + 1]);
    if (prompts[d] < 0 || prompts[d] > starts[d + 1] - starts[d])
      return SRT_ERROR(code,
                       "token file '%s': document %lld has a prompt of %lld tokens, outside "
                       "[0, its %lld tokens]",
                       path, (long long)d, (long long)prompts[d],
                       (long long)(starts[d + 1] - starts[d]));
  }
  if (starts[documents] != count)
    return SRT_ERROR(code,
                     "token file '%s': the document index ends at token %lld, but the file "
                     "has %lld tokens",
                     path, (long long)starts[documents], (long long)count);
  return NULL;
}

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
  free(t->starts);
  free(t->prompts);
  free((char *)t->tokenizer.name);
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

// Reads `n` little-endian u64 at `at` into out, refusing values past
// INT64_MAX (naming `what`).
static srt_status read_u64s(const srt_tokens *t, int64_t at, int64_t n, int64_t *out,
                            const char *what) {
  unsigned char *buf = malloc((size_t)(n ? n : 1) * 8);
  if (!buf)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory", t->path);
  srt_status s = read_at(t, buf, (size_t)n * 8, at);
  for (int64_t i = 0; !s && i < n; ++i) {
    uint64_t v = load_le(buf + 8 * i, 8);
    if (v > (uint64_t)INT64_MAX)
      s = SRT_ERROR(SRT_DATA_LOSS, "token file '%s': %s %lld is %llu, past 2^63", t->path,
                    what, (long long)i, (unsigned long long)v);
    out[i] = (int64_t)v;
  }
  free(buf);
  return s;
}

// Version 2's fields after the header: the tokenizer identity and the
// document index, checked against the file's size and token count.
static srt_status open_documents(srt_tokens *t, uint64_t count, uint64_t width) {
  unsigned char f[SRT_TOKENS_V2_FIXED_BYTES];
  if (t->bytes < SRT_TOKENS_HEADER_BYTES + SRT_TOKENS_V2_FIXED_BYTES)
    return SRT_ERROR(SRT_DATA_LOSS, "token file '%s' (version 2): %lld bytes, shorter than "
                                    "its %d bytes of header and fields",
                     t->path, (long long)t->bytes,
                     SRT_TOKENS_HEADER_BYTES + SRT_TOKENS_V2_FIXED_BYTES);
  SRT_RETURN_IF_ERROR(read_at(t, f, sizeof f, SRT_TOKENS_HEADER_BYTES));
  uint64_t docs = load_le(f, 8), digest = load_le(f + 8, 8);
  uint64_t kind = load_le(f + 16, 4), name_len = load_le(f + 20, 4);
  if (kind > SRT_TOKENIZER_JSON || (kind == SRT_TOKENIZER_BYTES && digest != 0))
    return SRT_ERROR(SRT_DATA_LOSS, "token file '%s': tokenizer kind %llu with digest %016llx "
                                    "(0: bytes with digest 0; 1: tokenizer.json)",
                     t->path, (unsigned long long)kind, (unsigned long long)digest);
  if (name_len == 0 || name_len > SRT_TOKENS_MAX_NAME)
    return SRT_ERROR(SRT_DATA_LOSS, "token file '%s': tokenizer name of %llu bytes, outside "
                                    "[1, %d]",
                     t->path, (unsigned long long)name_len, SRT_TOKENS_MAX_NAME);
  uint64_t size = (uint64_t)t->bytes;
  if (docs > size / 16 || count > size / width ||
      v2_data_offset(name_len, docs) + count * width != size)
    return SRT_ERROR(SRT_DATA_LOSS,
                     "token file '%s': header says %llu tokens of %llu bytes and %llu "
                     "documents (a %llu-byte tokenizer name), but the file has %llu bytes",
                     t->path, (unsigned long long)count, (unsigned long long)width,
                     (unsigned long long)docs, (unsigned long long)name_len,
                     (unsigned long long)size);
  char *name = calloc(1, name_len + 1);
  t->starts = malloc((docs + 1) * sizeof *t->starts);
  t->prompts = malloc((docs ? docs : 1) * sizeof *t->prompts);
  t->tokenizer = (srt_tokenizer_identity){.kind = (srt_tokenizer_kind)kind, .digest = digest,
                                          .name = name};
  if (!name || !t->starts || !t->prompts)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory (%llu documents)",
                     t->path, (unsigned long long)docs);
  int64_t at = SRT_TOKENS_HEADER_BYTES + SRT_TOKENS_V2_FIXED_BYTES;
  SRT_RETURN_IF_ERROR(read_at(t, name, name_len, at));
  if (memchr(name, 0, name_len))
    return SRT_ERROR(SRT_DATA_LOSS, "token file '%s': the tokenizer name holds a NUL byte",
                     t->path);
  at += (int64_t)(name_len + 7) / 8 * 8;
  SRT_RETURN_IF_ERROR(read_u64s(t, at, (int64_t)docs + 1, t->starts, "document start"));
  SRT_RETURN_IF_ERROR(
      read_u64s(t, at + 8 * ((int64_t)docs + 1), (int64_t)docs, t->prompts, "prompt length"));
  t->documents = (int64_t)docs;
  t->data = (int64_t)v2_data_offset(name_len, docs);
  return check_index(t->path, SRT_DATA_LOSS, t->starts, t->prompts, t->documents,
                     (int64_t)count);
}

// The header's checks (magic, version, width, vocabulary; version 1's size).
static srt_status check_header(const srt_tokens *t, const unsigned char *h) {
  const char *path = t->path;
  size_t size = (size_t)t->bytes;
  uint64_t version = load_le(h + 8, 2), width = load_le(h + 10, 2);
  uint64_t count = load_le(h + 16, 8), vocab = load_le(h + 24, 8);
  if (memcmp(h, kMagic, sizeof kMagic) != 0)
    return SRT_ERROR(SRT_DATA_LOSS,
                     "token file '%s': not a token file (magic is not \"SRTTOKS\"; make one "
                     "with shard-tokens)",
                     path);
  if (version != SRT_TOKENS_VERSION && version != SRT_TOKENS_VERSION_DOCUMENTS)
    return SRT_ERROR(SRT_DATA_LOSS, "token file '%s': version %llu, this runtime reads 1 and 2",
                     path, (unsigned long long)version);
  if (width != 1 && width != 2 && width != 4)
    return SRT_ERROR(SRT_DATA_LOSS, "token file '%s': %llu bytes per token, not 1, 2 or 4",
                     path, (unsigned long long)width);
  if (version == SRT_TOKENS_VERSION &&
      (count > (uint64_t)(size - SRT_TOKENS_HEADER_BYTES) / width ||
       SRT_TOKENS_HEADER_BYTES + count * width != size))
    return SRT_ERROR(SRT_DATA_LOSS,
                     "token file '%s': header says %llu tokens of %llu bytes, but the file has "
                     "%zu bytes after the header",
                     path, (unsigned long long)count, (unsigned long long)width,
                     size - SRT_TOKENS_HEADER_BYTES);
  if (vocab == 0 || vocab > ((uint64_t)1 << 32))
    return SRT_ERROR(SRT_DATA_LOSS, "token file '%s': vocabulary size %llu outside [1, 2^32]",
                     path, (unsigned long long)vocab);
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
  if (!s)
    s = check_header(t, h);
  t->version = (int)load_le(h + 8, 2);
  t->width = (int)load_le(h + 10, 2);
  t->data = SRT_TOKENS_HEADER_BYTES;
  if (!s && t->version == SRT_TOKENS_VERSION_DOCUMENTS)
    s = open_documents(t, load_le(h + 16, 8), (uint64_t)t->width);
  if (s) {
    srt_tokens_close(t);
    return s;
  }
  t->count = (int64_t)load_le(h + 16, 8);
  t->vocab = (int64_t)load_le(h + 24, 8);
  *out = t;
  return NULL;
}

int64_t srt_tokens_count(const srt_tokens *t) { return t->count; }
int64_t srt_tokens_vocab(const srt_tokens *t) { return t->vocab; }
int srt_tokens_version(const srt_tokens *t) { return t->version; }
int64_t srt_tokens_documents(const srt_tokens *t) { return t->documents; }
const int64_t *srt_tokens_document_starts(const srt_tokens *t) { return t->starts; }
const int64_t *srt_tokens_prompt_lengths(const srt_tokens *t) { return t->prompts; }
const char *srt_tokens_path(const srt_tokens *t) { return t->path; }

bool srt_tokens_tokenizer(const srt_tokens *t, srt_tokenizer_identity *out) {
  if (t->version != SRT_TOKENS_VERSION_DOCUMENTS)
    return false;
  *out = t->tokenizer;
  return true;
}

// Byte offset of token i.
static int64_t offset_of(const srt_tokens *t, int64_t i) { return t->data + i * t->width; }

srt_status srt_tokens_read(const srt_tokens *t, int64_t at, int64_t n, int64_t *ids) {
  if (at < 0 || n < 0 || at > t->count - n)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "token file '%s': tokens [%lld, %lld) outside its %lld tokens", t->path,
                     (long long)at, (long long)(at + n), (long long)t->count);
  enum { kChunk = 1 << 14 };
  unsigned char *buf = malloc((size_t)kChunk * 4); // not on the stack: see check_vocab
  if (!buf)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory", t->path);
  srt_status s = NULL;
  for (int64_t i0 = 0; !s && i0 < n; i0 += kChunk) {
    int64_t m = n - i0 < kChunk ? n - i0 : kChunk;
    s = read_at(t, buf, (size_t)(m * t->width), offset_of(t, at + i0));
    for (int64_t i = 0; !s && i < m; ++i)
      ids[i0 + i] = (int64_t)load_le(buf + i * t->width, t->width);
  }
  free(buf);
  return s;
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

// The checks both writers share: the vocabulary and every id.
static srt_status check_tokens(const char *path, const int64_t *tokens, int64_t count,
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
  return NULL;
}

// Writes the header, `extra` bytes of version 2 fields (NULL: version 1)
// and the tokens, atomically.
static srt_status write_file(const char *path, const int64_t *tokens, int64_t count,
                             int64_t vocab, const unsigned char *extra, size_t extra_bytes) {
  int width = vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4;
  size_t head = SRT_TOKENS_HEADER_BYTES + extra_bytes;
  size_t bytes = head + (size_t)count * (size_t)width;
  unsigned char *h = calloc(1, bytes);
  if (!h)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory (%zu bytes)", path,
                     bytes);
  memcpy(h, kMagic, sizeof kMagic);
  store_le(h + 8, extra ? SRT_TOKENS_VERSION_DOCUMENTS : SRT_TOKENS_VERSION, 2);
  store_le(h + 10, (uint64_t)width, 2);
  store_le(h + 16, (uint64_t)count, 8);
  store_le(h + 24, (uint64_t)vocab, 8);
  if (extra)
    memcpy(h + SRT_TOKENS_HEADER_BYTES, extra, extra_bytes);
  for (int64_t i = 0; i < count; ++i)
    store_le(h + head + i * width, (uint64_t)tokens[i], width);
  srt_status s = srt_write_file("token file", path, h, bytes);
  free(h);
  return s;
}

srt_status srt_tokens_write(const char *path, const int64_t *tokens, int64_t count,
                            int64_t vocab) {
  SRT_RETURN_IF_ERROR(check_tokens(path, tokens, count, vocab));
  return write_file(path, tokens, count, vocab, NULL, 0);
}

srt_status srt_tokens_write_documents(const char *path, const int64_t *tokens, int64_t count,
                                      int64_t vocab, const int64_t *starts,
                                      const int64_t *prompts, int64_t documents,
                                      const srt_tokenizer_identity *tok) {
  SRT_RETURN_IF_ERROR(check_tokens(path, tokens, count, vocab));
  size_t name_len = tok->name ? strlen(tok->name) : 0;
  if (documents < 0 || (tok->kind != SRT_TOKENIZER_BYTES && tok->kind != SRT_TOKENIZER_JSON) ||
      (tok->kind == SRT_TOKENIZER_BYTES && tok->digest != 0) || name_len == 0 ||
      name_len > SRT_TOKENS_MAX_NAME)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "token file '%s': %lld documents, tokenizer kind %d, digest %016llx, name "
                     "of %zu bytes (need documents >= 0, a known kind, bytes with digest 0, a "
                     "name of 1 to %d bytes)",
                     path, (long long)documents, (int)tok->kind,
                     (unsigned long long)tok->digest, name_len, SRT_TOKENS_MAX_NAME);
  SRT_RETURN_IF_ERROR(check_index(path, SRT_INVALID_ARGUMENT, starts, prompts, documents, count));
  size_t bytes = (size_t)v2_data_offset(name_len, (uint64_t)documents) - SRT_TOKENS_HEADER_BYTES;
  unsigned char *x = calloc(1, bytes);
  if (!x)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "token file '%s': out of memory", path);
  store_le(x, (uint64_t)documents, 8);
  store_le(x + 8, tok->digest, 8);
  store_le(x + 16, (uint64_t)tok->kind, 4);
  store_le(x + 20, name_len, 4);
  memcpy(x + SRT_TOKENS_V2_FIXED_BYTES, tok->name, name_len);
  unsigned char *index = x + SRT_TOKENS_V2_FIXED_BYTES + (name_len + 7) / 8 * 8;
  for (int64_t d = 0; d <= documents; ++d)
    store_le(index + 8 * d, (uint64_t)starts[d], 8);
  for (int64_t d = 0; d < documents; ++d)
    store_le(index + 8 * (documents + 1 + d), (uint64_t)prompts[d], 8);
  srt_status s = write_file(path, tokens, count, vocab, x, bytes);
  free(x);
  return s;
}
