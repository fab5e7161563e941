// Token files: the training data format of the driver (docs/data.md) — a
// 32-byte little-endian header (magic "SRTTOKS\0", version, bytes per token,
// token count, vocabulary size) followed by the tokens as little-endian
// unsigned integers — and the deterministic batching that makes a resumed
// run see the same data: step k's global row r is the window of `seq`
// tokens starting at ((k - 1) * batch + r) * seq mod (count - seq + 1).
#ifndef SHARDRT_TOKENS_H
#define SHARDRT_TOKENS_H

#include <stdint.h>

#include "shardrt/status.h"

/// Current version of the format (header field `version`).
#define SRT_TOKENS_VERSION 1
/// Bytes of the header.
#define SRT_TOKENS_HEADER_BYTES 32

/// An open, validated token file (read-only mapping).
typedef struct srt_tokens srt_tokens;

/// Opens and maps `path` and validates the header: magic, version, bytes
/// per token (1, 2 or 4) and a file size of exactly header + count * bytes.
/// On success *out holds the file (close with srt_tokens_close).
/// Errors (*out = NULL; messages name the file and the values): SRT_NOT_FOUND
/// for a missing file; SRT_IO when it cannot be read or mapped;
/// SRT_DATA_LOSS for a bad magic, version, token size or length.
srt_status srt_tokens_open(const char *path, srt_tokens **out);

/// Closes and frees `t`; NULL is fine.
void srt_tokens_close(srt_tokens *t);

/// Number of tokens in the file.
int64_t srt_tokens_count(const srt_tokens *t);

/// The vocabulary size the file declares (every id is below it; 256 for
/// byte-level files).
int64_t srt_tokens_vocab(const srt_tokens *t);

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
/// vocab - 1 (1, 2 or 4 bytes). Errors: SRT_INVALID_ARGUMENT for vocab
/// outside [1, 2^32] or a token outside [0, vocab) (naming its index);
/// SRT_IO naming the file and the OS error.
srt_status srt_tokens_write(const char *path, const int64_t *tokens, int64_t count,
                            int64_t vocab);

#endif // SHARDRT_TOKENS_H
