// The CUDA backend's per-rank state (srt_exec.device): the GPU, its streams,
// the library handles and the NCCL communicators, all created once by
// srt_cuda_device_open and freed by srt_cuda_device_free (backend.c, the
// backend object, calls them). Internal to runtime/cuda.
#ifndef SHARDRT_CUDA_DEVICE_H
#define SHARDRT_CUDA_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "kernels.h"
#include "shardrt/collectives.h"
#include "shardrt/context.h"
#include "shardrt/program.h"

/// One cached cuBLASLt plan (descriptors and the heuristic's algorithm) for
/// a GEMM shape; see gemm.c.
typedef struct srt_cuda_gemm_plan {
  int32_t key[10];
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulAlgo_t algo;
} srt_cuda_gemm_plan;

enum { SRT_CUDA_GEMM_PLANS = 64 };

/// The communicators of a device: one per mesh axis (indexed by the axis),
/// then the cp group's (only with cp > 1; the placements' axis 0 is dp x
/// cp, so no graph collective runs over cp alone).
enum { SRT_CUDA_COMM_CP = SRT_MESH_NDIMS, SRT_CUDA_NUM_COMMS };

typedef struct srt_cuda_device {
  srt_context *ctx;
  int ordinal; // cudaSetDevice index
  /// Ops run on `compute`; collectives on `comm`, ordered after the ops
  /// before them and before the ops after them by events.
  cudaStream_t compute, comm;
  cudaEvent_t to_comm, to_compute;
  /// The non-blocking collectives in flight (shardrt/collectives.h's
  /// slots): each one's completion on `comm`, recorded by its _start op and
  /// waited for by the compute stream at srt_cuda_op_collective_wait;
  /// created at a slot's first use.
  cudaEvent_t pending[SRT_MAX_PENDING];
  bool pending_live[SRT_MAX_PENDING];
  /// A bucket in flight in a slot (srt_cuda_op_bucket_start): what its wait
  /// unpacks, and the slot's staging buffer (grown on demand, kept).
  struct {
    int kind, parts;
    int64_t total;
    size_t elem;
    void *stage;
    size_t stage_bytes;
  } bucket[SRT_MAX_PENDING];
  cublasLtHandle_t lt;
  void *lt_workspace;
  size_t lt_workspace_bytes;
  srt_cuda_gemm_plan plans[SRT_CUDA_GEMM_PLANS];
  int num_plans;
  /// One communicator per mesh axis (0 = dp x cp, 1 = tp), then, with
  /// context parallelism (cp > 1), one over the cp group
  /// (SRT_CUDA_COMM_CP: the attention's K/V all-gather), created once.
  ncclComm_t comms[SRT_CUDA_NUM_COMMS];
  bool has_comms[SRT_CUDA_NUM_COMMS];
  /// The op that enqueued the last collective on each communicator (for a
  /// deadline's message); NULL before the first.
  const char *last_collective[SRT_CUDA_NUM_COMMS];
  /// The arena as the program's offsets see it: offset k is arena + k.
  /// Without offload that is the allocation `alloc`; with --cpu-offload the
  /// host-only prefix [0, offload) is not allocated on the device, and
  /// `arena` lies `offload` bytes before `alloc` (never dereferenced there).
  uint8_t *arena, *alloc;
  int64_t arena_bytes, offload;
  /// With offload: the host copy of the persistent region (the context's
  /// arena, pinned with cudaHostRegister while the device is open), which
  /// holds the only fp32 weights and moments; NULL otherwise.
  uint8_t *host;
  /// Scratch for ops and collectives (grown on demand, synchronously).
  void *scratch;
  size_t scratch_bytes;
  /// Every parameter for the multi-tensor grad-norm and AdamW kernels.
  srt_cuda_param_slot *slots; // device
  int32_t num_slots;
  int64_t total_numel;
  /// Small device values: [0, 2) grad-norm accumulator (double), [2, 4)
  /// the first bad label (int64, row + 1 and value; 0 = none), then the
  /// grad norm's per-block partials.
  double *norm_acc;
  int64_t *bad_label;
  double *norm_partials;
  /// cuDNN fused attention (cudnn_attention.c): the handle, its cached
  /// plans (owned by cudnn_attention.c), and which shapes were checked
  /// against our kernels (ops_attention.c).
  cudnnHandle_t cudnn;
  bool use_cudnn; // false with SHARD_CUDA_ATTENTION=kernel
  void *cudnn_workspace; // cuDNN's own: ops keep their data in `scratch`
  size_t cudnn_workspace_bytes;
  struct srt_cudnn_plan_cache *cudnn_plans;
  srt_cuda_attention_shape checked[16];
  int8_t checked_ok[16][2]; // [forward, backward]: 0 unchecked, 1 agrees, -1 disabled
  int num_checked;
} srt_cuda_device;

/// Opens this rank's GPU for program `p` on `ctx`: device, streams, handles,
/// the arena (p->arena_bytes less the host-only offload prefix, zeroed), the
/// parameter slots, then, once every rank agreed that its local part
/// worked, one NCCL communicator per mesh axis and (cp > 1) one over cp.
/// Errors: no device, out of device or pinned memory, a
/// CUDA/cuBLASLt/cuDNN/NCCL failure, another rank's failure; nothing is
/// left allocated then. The caller frees `*out` with srt_cuda_device_free
/// after waiting for its streams.
srt_status srt_cuda_device_open(srt_context *ctx, const srt_program *p, srt_cuda_device **out);

/// Frees everything of `d` that device.c made (communicators, handles,
/// buffers, streams) and `d`; NULL does nothing. The caller has waited for
/// the streams and released what others hang off `d` (the cuDNN plans).
void srt_cuda_device_free(srt_cuda_device *d);

/// The staging buffer of slot `slot` (a bucket's packed data), at least
/// `bytes`, grown as srt_cuda_scratch is (after the streams are idle).
srt_status srt_cuda_stage(srt_cuda_device *d, int slot, size_t bytes, void **out);

/// Waits until the work enqueued on `stream` has finished, against the
/// deadline of the context's collectives (srt_context_timeout, the
/// driver's --timeout): polls the stream, spinning for the first 20 ms and
/// then sleeping between polls with a backoff up to 1 ms (a rank waiting on
/// a stalled peer does not burn a core), and checks every communicator for
/// an asynchronous NCCL error. On such an error, or when the deadline
/// passes, every communicator is aborted (ncclCommAbort, which also ends
/// NCCL kernels still waiting for a peer; torch's NCCL watchdog does the
/// same) and marked gone. `what` names the wait in messages (e.g. "the
/// step's read-back"). Errors: SRT_DEADLINE_EXCEEDED naming `what`, the
/// step, the seconds waited and the last collective enqueued on each axis;
/// SRT_UNAVAILABLE for a CUDA or NCCL error.
srt_status srt_cuda_wait(srt_cuda_device *d, cudaStream_t stream, const char *what);

/// The device of an exec, or an error naming `op` when the exec has none.
srt_status srt_cuda_device_of(const srt_exec *e, const char *op, srt_cuda_device **out);

/// A device pointer `offset` bytes into the arena.
static inline void *srt_cuda_at(const srt_exec *e, int64_t offset) {
  return e->arena + offset;
}

/// Device scratch of at least `bytes` (64-byte aligned); previous contents
/// are lost when it grows (the growth waits for the compute stream).
/// Errors: SRT_UNAVAILABLE when cudaMalloc fails.
srt_status srt_cuda_scratch(srt_cuda_device *d, size_t bytes, void **out);

/// cuDNN's workspace of at least `bytes`, separate from the ops' scratch
/// (which holds the attention op's own buffers during a cuDNN call).
/// Errors: as srt_cuda_scratch.
srt_status srt_cuda_cudnn_workspace(srt_cuda_device *d, size_t bytes, void **out);

/// Launch check: a launcher's result as a status naming the kernel and the
/// call's source location.
srt_status srt_cuda_launched(cudaError_t e, const char *kernel, const char *file, int line);

/// D = op(A) op(B) (+ bias), column-major (cuBLASLt's convention): A is
/// [m, k] after `trans_a` (stored [k, m] when transposed, leading dim lda),
/// B [k, n] after `trans_b`, D [m, n] with leading dim m. A and B bf16, fp32
/// accumulation, D bf16 (`d_f32` false) or fp32; bias [m] (bf16) or NULL
/// (the BIAS epilogue). Plans are cached per shape.
/// Errors: SRT_UNAVAILABLE naming the failing cuBLASLt call, or when the
/// heuristic finds no algorithm for the shape.
srt_status srt_cuda_gemm(srt_cuda_device *d, bool trans_a, bool trans_b, int64_t m, int64_t n,
                         int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                         void *out, bool d_f32, const void *bias);

/// Orders the comm stream after the compute stream's work so far.
srt_status srt_cuda_comm_begin(srt_cuda_device *d);
/// Orders the compute stream after the comm stream's work so far.
srt_status srt_cuda_comm_end(srt_cuda_device *d);

#endif // SHARDRT_CUDA_DEVICE_H
