// Context parallelism's moves of per-token data on the device (the layout
// of shardrt/cp.h: each row's seq tokens cut into 2 x cp equal chunks, cp
// rank c holding chunks c and 2cp - 1 - c). NCCL gathers and scatters
// rank-major blocks; the attention's K/V and segment ids are needed in
// token order, and the gradients of K/V go back in rank order. Internal to
// runtime/cuda.
#ifndef SHARDRT_CUDA_CP_LAYOUT_H
#define SHARDRT_CUDA_CP_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/// Rank order to token order, enqueued on `stream`: `ranks` is [cp][rows,
/// seq/cp, token_bytes] (cp rank c's local rows, as ncclAllGather leaves
/// them), `tokens` [rows, seq, token_bytes] with token t of a row taken
/// from the rank and local position that srt_cp_global_token maps to t (the
/// device counterpart of srt_cp_gather). Both device pointers, not
/// overlapping; cp >= 2 and 2 x cp divides seq (srt_cp_check; not checked
/// here). Returns the first failing copy's error, else cudaSuccess.
cudaError_t srt_cuda_cp_to_tokens(void *tokens, const void *ranks, int64_t rows, int64_t seq,
                                  int cp, size_t token_bytes, cudaStream_t stream);

/// The inverse: `tokens` [rows, seq, token_bytes] to `ranks` [cp][rows,
/// seq/cp, token_bytes] (srt_cp_take for every rank), the layout
/// ncclReduceScatter splits into the ranks' local rows. As
/// srt_cuda_cp_to_tokens otherwise.
cudaError_t srt_cuda_cp_to_ranks(void *ranks, const void *tokens, int64_t rows, int64_t seq,
                                 int cp, size_t token_bytes, cudaStream_t stream);

#endif // SHARDRT_CUDA_CP_LAYOUT_H
