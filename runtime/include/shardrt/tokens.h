// Token files: the training data format of the driver (docs/data.md) — a
// 32-byte little-endian header (magic "SRTTOKS\0", version, bytes per token,
// token count, vocabulary size) followed, in version 2, by the identity of
// the tokenizer that made the file and the document index (where each
// document starts, how many of its first tokens are prompt), then the
// tokens as little-endian unsigned integers — and the windowed batching of
// version 1 that makes a resumed run see the same data: step k's global row
// r is the window of `seq` tokens starting at
// ((k - 1) * batch + r) * seq mod (count - seq + 1). Version 2 files are
// packed by document instead (runtime/train/pack.c).
#ifndef SHARDRT_TOKENS_H
#define SHARDRT_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardrt/status.h"

/// Version 1: tokens only (one stream, read in windows).
#define SRT_TOKENS_VERSION 1
/// Version 2: tokens, a document index and the tokenizer's identity.
#define SRT_TOKENS_VERSION_DOCUMENTS 2
/// Bytes of the header (both versions).
#define SRT_TOKENS_HEADER_BYTES 32
/// Bytes of version 2's fixed fields after the header (documents, digest,
/// tokenizer kind, name length).
#define SRT_TOKENS_V2_FIXED_BYTES 24
/// The longest tokenizer name (bytes) a version 2 file holds.
#define SRT_TOKENS_MAX_NAME 4096

/// What made a token file's ids (version 2).
typedef enum srt_tokenizer_kind {
  SRT_TOKENIZER_BYTES = 0, ///< one token per byte (vocabulary 256); name "bytes", digest 0
  SRT_TOKENIZER_JSON = 1,  ///< a Hugging Face tokenizer.json: name = its path as given
} srt_tokenizer_kind;

/// The identity of the tokenizer that made a token file: its kind, the
/// FNV-1a 64-bit digest of tokenizer.json's bytes (srt_tokenizer_digest;
/// it identifies the file, it does not authenticate it) and a name for
/// messages (the path shard-tokens was given, or "bytes").
typedef struct srt_tokenizer_identity {
  srt_tokenizer_kind kind;
  uint64_t digest;
  const char *name; ///< NUL-terminated, at most SRT_TOKENS_MAX_NAME bytes
} srt_tokenizer_identity;

/// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3; Fowler,
/// Noll, Vo) of `n` bytes: a tokenizer.json's identity in token files, and
/// what the driver compares with the tokenizer compiled into its program.
uint64_t srt_tokenizer_digest(const void *bytes, size_t n);

/// An open, validated token file (read-only mapping).
typedef struct srt_tokens srt_tokens;

/// Opens `path` and validates the header: magic, version (1 or 2), bytes
/// per token (1, 2 or 4) and a file size of exactly what the header and
/// (version 2) the document index say; a version 2 file's index is read
/// and checked: the first document starts at token 0, each starts after
/// the previous one (documents are non-empty, sorted, not overlapping), the
/// last ends at the token count, and no prompt is longer than its document.
/// On success *out holds the file (close with srt_tokens_close).
/// Errors (*out = NULL; messages name the file and the values): SRT_NOT_FOUND
/// for a missing file; SRT_IO when it cannot be read; SRT_DATA_LOSS for a
/// bad magic, version, token size, length, tokenizer field or index.
srt_status srt_tokens_open(const char *path, srt_tokens **out);

/// Closes and frees `t`; NULL is fine.
void srt_tokens_close(srt_tokens *t);

/// Number of tokens in the file.
int64_t srt_tokens_count(const srt_tokens *t);

/// The vocabulary size the file declares (every id is below it; 256 for
/// byte-level files).
int64_t srt_tokens_vocab(const srt_tokens *t);

/// The format version of the file: 1 (windows) or 2 (documents).
int srt_tokens_version(const srt_tokens *t);

/// Number of documents (0 for a version 1 file).
int64_t srt_tokens_documents(const srt_tokens *t);

/// The document index of a version 2 file (NULL for version 1): documents
/// + 1 token offsets, document d being tokens [starts[d], starts[d + 1]).
const int64_t *srt_tokens_document_starts(const srt_tokens *t);

/// Per document, how many of its first tokens are prompt (BOS and the
/// prompt of an SFT pair: no loss); NULL for version 1.
const int64_t *srt_tokens_prompt_lengths(const srt_tokens *t);

/// The tokenizer that made a version 2 file (the name stays owned by `t`);
/// false for a version 1 file, which does not say.
bool srt_tokens_tokenizer(const srt_tokens *t, srt_tokenizer_identity *out);

/// The file's path as opened.
const char *srt_tokens_path(const srt_tokens *t);

/// Reads tokens [at, at + n) into ids (int64). Errors: SRT_INVALID_ARGUMENT
/// for a range outside the file; SRT_DATA_LOSS when the file was truncated
/// since it was opened.
srt_status srt_tokens_read(const srt_tokens *t, int64_t at, int64_t n, int64_t *ids);

/// Token `i` (0 <= i < count), or -1 when the file no longer holds it.
int64_t srt_tokens_at(const srt_tokens *t, int64_t i);

/// Checks every token id against a model's vocabulary (one pass over the
/// file). Errors: SRT_OUT_OF_RANGE naming the file, the first token index
/// whose id is >= vocab, the id and vocab.
srt_status srt_tokens_check_vocab(const srt_tokens *t, int64_t vocab);

/// Fills ids[rows * seq] (int64, row-major) with global rows
/// [row0, row0 + rows) of step `step` (1-based) for a global batch of
/// `batch` rows of `seq` tokens: row r is the window starting at
/// ((step - 1) * batch + r) * seq mod (count - seq + 1), so consecutive
/// steps walk the file and any step can be regenerated from its number.
/// Errors: SRT_INVALID_ARGUMENT for step < 1, non-positive sizes, rows
/// outside the batch, or a start position that overflows int64;
/// SRT_OUT_OF_RANGE when the file has fewer than `seq` tokens (naming both);
/// SRT_DATA_LOSS when the file was truncated since it was opened (naming
/// its sizes then and now; tokens are read, not mapped, so this is an error
/// and no signal).
srt_status srt_tokens_batch(const srt_tokens *t, int64_t step, int64_t batch, int64_t seq,
                            int64_t row0, int64_t rows, int64_t *ids);

/// Writes `count` tokens (each in [0, vocab)) to `path` atomically (a
/// temporary file, fsync, rename), with the smallest token size that holds
/// vocab - 1 (1, 2 or 4 bytes), as a version 1 file. Errors:
/// SRT_INVALID_ARGUMENT for vocab outside [1, 2^32] or a token outside
/// [0, vocab) (naming its index); SRT_IO naming the file and the OS error.
srt_status srt_tokens_write(const char *path, const int64_t *tokens, int64_t count,
                            int64_t vocab);

/// Writes a version 2 file like srt_tokens_write, with `documents`
/// documents: starts[documents + 1] (token offsets, starts[0] = 0,
/// increasing, starts[documents] = count), prompts[documents] (prompt
/// tokens of each, at most its length) and the tokenizer identity `tok`.
/// Errors: srt_tokens_write's; SRT_INVALID_ARGUMENT for an index that
/// srt_tokens_open would refuse (naming the document and values) or a
/// bad identity (kind, name empty or longer than SRT_TOKENS_MAX_NAME).
srt_status srt_tokens_write_documents(const char *path, const int64_t *tokens, int64_t count,
                                      int64_t vocab, const int64_t *starts,
                                      const int64_t *prompts, int64_t documents,
                                      const srt_tokenizer_identity *tok);

#endif // SHARDRT_TOKENS_H
