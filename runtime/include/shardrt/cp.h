// The load-balanced layout of context parallelism: a row of `seq` tokens
// cut into 2 x cp equal chunks, cp rank c holding chunks c and 2cp - 1 - c
// (Megatron-LM's and torch's head-tail load balance for causal attention),
// and the moves of per-token data between the global token order and the
// ranks' local orders (the driver's batch split; the attention's K/V
// all-gather and the reduce-scatter of their gradients).
#ifndef SHARDRT_CP_H
#define SHARDRT_CP_H

#include <stddef.h>
#include <stdint.h>

#include "shardrt/status.h"

/// The largest cp size (the attention's K/V gather keeps one pointer per
/// cp rank on the stack).
#define SRT_MAX_CP 64

/// Checks a context-parallel split of rows of `seq` tokens over `cp` ranks
/// for cp rank `c`. Errors: SRT_INVALID_ARGUMENT naming the values for
/// cp < 1, c outside [0, cp), seq < 1, or (cp > 1) a seq that 2 x cp does
/// not divide (the split needs 2 x cp equal chunks).
srt_status srt_cp_check(int64_t seq, int cp, int c);

/// The global token index (in [0, seq)) of position `j` (in [0, seq/cp))
/// of cp rank `c`'s local rows: a row's `seq` tokens are cut into 2 x cp
/// equal chunks and rank c holds chunk c then chunk 2 x cp - 1 - c, so
/// every rank holds one early and one late chunk and does the same causal
/// attention work (the head-tail load balancer of Megatron-LM's
/// get_batch_on_this_cp_rank and torch's context_parallel). At cp 1: j
/// (the identity, any seq). The attention kernel's query indices; the
/// arguments must pass srt_cp_check.
int64_t srt_cp_global_token(int64_t seq, int cp, int c, int64_t j);

/// The permutation that puts K/V all-gathered over cp back in token order:
/// the gathered rows are the cp ranks' local rows in cp rank order, i.e.
/// 2 x cp chunks (rank 0's two, rank 1's two, ...), and global chunk k
/// (tokens [k seq/(2cp), (k+1) seq/(2cp))) is gathered chunk src[k]:
/// 2k for k < cp (rank k's first chunk), 2 (2cp - 1 - k) + 1 otherwise
/// (rank 2cp-1-k's second). `src` has 2 x cp entries; cp >= 1.
void srt_cp_kv_chunk_order(int cp, int64_t *src);

/// Copies cp rank `c`'s tokens of `rows` rows of `seq` tokens of
/// `token_bytes` bytes each (int64 ids: 8; a [rows, seq, hidden] float
/// activation: 4 x hidden) from `global` [rows, seq, token_bytes] to
/// `local` [rows, seq/cp, token_bytes]: local position j of a row is
/// global token srt_cp_global_token(seq, cp, c, j) of the same row.
/// Errors: srt_cp_check's; SRT_INVALID_ARGUMENT for rows < 0 or
/// token_bytes 0.
srt_status srt_cp_take(const void *global, int64_t rows, int64_t seq, int cp, int c,
                         size_t token_bytes, void *local);

/// The inverse of srt_cp_take over all ranks: `local[c]` holds cp rank
/// c's [rows, seq/cp, token_bytes] tokens (c in [0, cp)); writes `global`
/// [rows, seq, token_bytes] in token order (for dumps and checks of a
/// cp-sharded step against the unsharded one). Errors: as srt_cp_take.
srt_status srt_cp_gather(const void *const *local, int64_t rows, int64_t seq, int cp,
                           size_t token_bytes, void *global);

#endif // SHARDRT_CP_H
