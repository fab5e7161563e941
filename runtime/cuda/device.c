// The CUDA backend's per-rank state: opening the GPU (device, streams,
// cuBLASLt and cuDNN handles, the device arena, the parameter table of the
// multi-tensor kernels), one NCCL communicator per mesh axis (and one over
// cp under context parallelism), and freeing them. The backend object that
// owns a device's lifetime (and that of what hangs off it: the cuDNN plans,
// the offload copies) is backend.c's.
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/arena.h"
#include "shardrt/collectives.h"
#include "shardrt/cuda.h"

enum { kLtWorkspaceBytes = 32 << 20 }; // cuBLASLt's recommendation for Hopper

int srt_cuda_device_count(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

srt_status srt_cuda_device_of(const srt_exec *e, const char *op, srt_cuda_device **out) {
  if (!e || !e->ctx || !e->arena || !e->device)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: exec, its context, arena or device is NULL (a cuda program runs "
                     "only through its backend's open)",
                     op);
  *out = e->device;
  return NULL;
}

srt_status srt_cuda_launched(cudaError_t e, const char *kernel, const char *file, int line) {
  if (e == cudaSuccess)
    return NULL;
  return SRT_ERROR(SRT_UNAVAILABLE, "%s failed at %s:%d: %s (%s)", kernel, file, line,
                   cudaGetErrorName(e), cudaGetErrorString(e));
}

// Grows *buf (of *size bytes) to at least `bytes`.
static srt_status grow(srt_cuda_device *d, void **buf, size_t *size, size_t bytes) {
  if (bytes > *size) {
    // Work already enqueued may still use the old buffer.
    SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "growing the scratch (compute stream)"));
    SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->comm, "growing the scratch (comm stream)"));
    SRT_CUDA_CHECK(cudaFree(*buf));
    *buf = NULL;
    *size = 0;
    size_t grown = bytes + bytes / 4 + 256;
    SRT_CUDA_CHECK(cudaMalloc(buf, grown));
    *size = grown;
  }
  return NULL;
}

srt_status srt_cuda_scratch(srt_cuda_device *d, size_t bytes, void **out) {
  SRT_RETURN_IF_ERROR(grow(d, &d->scratch, &d->scratch_bytes, bytes));
  *out = d->scratch;
  return NULL;
}

srt_status srt_cuda_stage(srt_cuda_device *d, int slot, size_t bytes, void **out) {
  SRT_RETURN_IF_ERROR(grow(d, &d->bucket[slot].stage, &d->bucket[slot].stage_bytes, bytes));
  *out = d->bucket[slot].stage;
  return NULL;
}

srt_status srt_cuda_cudnn_workspace(srt_cuda_device *d, size_t bytes, void **out) {
  SRT_RETURN_IF_ERROR(grow(d, &d->cudnn_workspace, &d->cudnn_workspace_bytes, bytes));
  *out = d->cudnn_workspace;
  return NULL;
}

srt_status srt_cuda_comm_begin(srt_cuda_device *d) {
  SRT_CUDA_CHECK(cudaEventRecord(d->to_comm, d->compute));
  SRT_CUDA_CHECK(cudaStreamWaitEvent(d->comm, d->to_comm, 0));
  return NULL;
}

srt_status srt_cuda_comm_end(srt_cuda_device *d) {
  SRT_CUDA_CHECK(cudaEventRecord(d->to_compute, d->comm));
  SRT_CUDA_CHECK(cudaStreamWaitEvent(d->compute, d->to_compute, 0));
  return NULL;
}

// The GPU of this rank: the node-local rank (Open MPI / Slurm / torchrun
// variables) modulo the visible devices, else the world rank modulo them.
static int pick_ordinal(srt_context *ctx, int count) {
  const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                        "LOCAL_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; ++i) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return atoi(v) % count;
  }
  return srt_context_rank(ctx) % count;
}

// Whether parameter `p` adds its gradient to the norm on this rank
// (srt_get_grad_norm's rule: on every axis where it is Replicate, only the
// axis's rank 0 counts it).
static int32_t counted(srt_context *ctx, const srt_param_info *p) {
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(ctx, coord);
  for (int axis = 0; axis < SRT_MESH_NDIMS; ++axis)
    if (p->placement[axis].kind == SRT_REPLICATE && coord[axis] != 0)
      return 0;
  return 1;
}

static srt_status build_slots(srt_cuda_device *d, const srt_program *p) {
  int32_t n = p->num_params;
  srt_cuda_param_slot *host = calloc((size_t)(n > 0 ? n : 1), sizeof *host);
  if (!host)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "cuda backend: no memory for %d parameter slots",
                     (int)n);
  int64_t start = 0;
  for (int32_t i = 0; i < n; ++i) {
    const srt_param_info *pi = &p->params[i];
    int64_t numel = 1;
    for (int k = 0; k < pi->rank; ++k)
      numel *= pi->local_shape[k];
    // With offload the weights and moments are on the host only: the device's
    // AdamW and refresh kernels, their only readers, never run.
    bool on_device = d->offload == 0;
    host[i] = (srt_cuda_param_slot){
        .param = on_device ? (float *)(void *)(d->arena + pi->offset) : NULL,
        .grad = (float *)(void *)(d->arena + pi->grad_offset),
        .m = on_device ? (float *)(void *)(d->arena + pi->m_offset) : NULL,
        .v = on_device ? (float *)(void *)(d->arena + pi->v_offset) : NULL,
        .compute = (srt_bf16 *)(void *)(d->arena + pi->compute_offset),
        .numel = numel,
        .start = start,
        .counted = counted(d->ctx, pi)};
    start += numel;
  }
  d->num_slots = n;
  d->total_numel = start;
  // Copies go on the compute stream and are waited for: a cudaMemcpy from
  // pageable memory runs on the legacy stream, which the non-blocking
  // compute stream does not wait for.
  cudaError_t e = cudaMalloc((void **)&d->slots, (size_t)(n > 0 ? n : 1) * sizeof *host);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(d->slots, host, (size_t)n * sizeof *host, cudaMemcpyHostToDevice,
                        d->compute);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(d->compute);
  free(host);
  SRT_CUDA_CHECK(e);
  return NULL;
}

// --cpu-offload: pins the host copy of the persistent region (the context's
// arena), so that the step's copies of gradients and bf16 weights run
// asynchronously at full bandwidth.
static srt_status pin_host(srt_cuda_device *d, const srt_program *p) {
  srt_arena *a = srt_context_arena(d->ctx);
  if (!a || !a->base || a->capacity < (size_t)p->persistent_bytes)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "cuda backend: --cpu-offload needs the host copy of the %lld-byte "
                     "persistent region as the context's arena (it has %zu bytes)",
                     (long long)p->persistent_bytes, a ? a->capacity : (size_t)0);
  cudaError_t e = cudaHostRegister(a->base, (size_t)p->persistent_bytes, cudaHostRegisterDefault);
  if (e != cudaSuccess)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "cuda backend: --cpu-offload cannot pin the %.2f GiB of host memory that "
                     "holds the weights and moments (cudaHostRegister: %s): every rank on the "
                     "node pins this much; use a larger dp (FSDP) or fewer ranks per node",
                     (double)p->persistent_bytes / (1 << 30), cudaGetErrorString(e));
  d->host = a->base;
  return NULL;
}

// Everything that does not talk to other ranks.
static srt_status open_local(srt_cuda_device *d, const srt_program *p) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return SRT_ERROR(SRT_UNAVAILABLE,
                     "cuda backend: no CUDA device (cudaGetDeviceCount: %s: no NVIDIA driver "
                     "or GPU?); this program was compiled with --backend=cuda",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  d->ordinal = pick_ordinal(d->ctx, count);
  SRT_CUDA_CHECK(cudaSetDevice(d->ordinal));
  SRT_CUDA_CHECK(cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking));
  SRT_CUDA_CHECK(cudaStreamCreateWithFlags(&d->comm, cudaStreamNonBlocking));
  SRT_CUDA_CHECK(cudaEventCreateWithFlags(&d->to_comm, cudaEventDisableTiming));
  SRT_CUDA_CHECK(cudaEventCreateWithFlags(&d->to_compute, cudaEventDisableTiming));
  SRT_CUBLAS_CHECK(cublasLtCreate(&d->lt));
  d->lt_workspace_bytes = kLtWorkspaceBytes;
  SRT_CUDA_CHECK(cudaMalloc(&d->lt_workspace, d->lt_workspace_bytes));
  SRT_CUDNN_CHECK(cudnnCreate(&d->cudnn));
  SRT_CUDNN_CHECK(cudnnSetStream(d->cudnn, d->compute));
  const char *attention = getenv("SHARD_CUDA_ATTENTION");
  d->use_cudnn = !(attention && !strcmp(attention, "kernel"));
  d->arena_bytes = p->arena_bytes;
  d->offload = p->offload_bytes;
  size_t device_bytes = (size_t)(p->arena_bytes - p->offload_bytes);
  e = cudaMalloc((void **)&d->alloc, device_bytes);
  if (e != cudaSuccess) {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "cuda backend: cannot allocate the %.2f GiB arena on device %d (%.2f GiB "
                     "free of %.2f): %s; use a smaller --batch/--seq, a larger tp or dp, "
                     "--activation-checkpointing or --cpu-offload",
                     (double)device_bytes / (1 << 30), d->ordinal,
                     (double)free_bytes / (1 << 30), (double)total / (1 << 30),
                     cudaGetErrorString(e));
  }
  SRT_CUDA_CHECK(cudaMemset(d->alloc, 0, device_bytes));
  // Integer arithmetic: the pointer below the allocation is only ever
  // offset back into it (the program's device buffers lie at >= offload).
  if ((uintptr_t)d->alloc < (uintptr_t)d->offload)
    return SRT_ERROR(SRT_INTERNAL, "cuda backend: the device allocation at %p lies below the "
                     "%lld-byte host-only prefix it must follow",
                     (void *)d->alloc, (long long)d->offload);
  d->arena = (uint8_t *)(uintptr_t)((uintptr_t)d->alloc - (uintptr_t)d->offload);
  if (d->offload)
    SRT_RETURN_IF_ERROR(pin_host(d, p));
  size_t small = (4 + 2 * SRT_CUDA_NORM_PARTIALS) * sizeof(double);
  SRT_CUDA_CHECK(cudaMalloc((void **)&d->norm_acc, small));
  SRT_CUDA_CHECK(cudaMemset(d->norm_acc, 0, small));
  d->bad_label = (int64_t *)(void *)(d->norm_acc + 2);
  d->norm_partials = d->norm_acc + 4;
  return build_slots(d, p);
}

// Communicator `i` (device.h: SRT_CUDA_COMM_*) over group `g`: the group's
// rank 0 makes the unique id, the group's broadcast carries it (with
// whether making it worked, so that no member waits for an id that never
// comes): MPI's, or for an env launch the TCP mesh's, which is llm.c's
// "tcp" init method (rank 0 hands the id out over a socket, with the
// context's deadline); every member joins.
static srt_status open_comm(srt_cuda_device *d, int i, srt_group *g) {
  struct {
    ncclUniqueId id;
    int32_t result;
  } root;
  memset(&root, 0, sizeof root);
  if (srt_group_rank(g) == 0)
    root.result = (int32_t)ncclGetUniqueId(&root.id);
  SRT_RETURN_IF_ERROR(srt_broadcast(g, &root, (int64_t)sizeof root, SRT_U8, 0));
  if (root.result != ncclSuccess)
    return SRT_ERROR(SRT_UNAVAILABLE, "ncclGetUniqueId failed on rank 0 of communicator %d "
                     "(0: dp x cp, 1: tp, 2: cp): %s",
                     i, ncclGetErrorString((ncclResult_t)root.result));
  SRT_NCCL_CHECK(ncclCommInitRank(&d->comms[i], srt_group_size(g), root.id, srt_group_rank(g)));
  d->has_comms[i] = true;
  return NULL;
}

// One communicator per mesh axis, and with context parallelism one over
// the cp group. Called only after every rank's local setup succeeded.
static srt_status open_comms(srt_cuda_device *d) {
  static const srt_group_kind kinds[SRT_MESH_NDIMS] = {SRT_GROUP_DP_CP, SRT_GROUP_TP};
  for (int axis = 0; axis < SRT_MESH_NDIMS; ++axis)
    SRT_RETURN_IF_ERROR(open_comm(d, axis, srt_context_group(d->ctx, kinds[axis])));
  if (srt_mesh_cp(srt_context_mesh(d->ctx)) > 1)
    SRT_RETURN_IF_ERROR(
        open_comm(d, SRT_CUDA_COMM_CP, srt_context_group(d->ctx, SRT_GROUP_CP)));
  return NULL;
}

void srt_cuda_device_free(srt_cuda_device *d) {
  if (!d)
    return;
  for (int i = 0; i < SRT_CUDA_NUM_COMMS; ++i)
    if (d->has_comms[i])
      ncclCommDestroy(d->comms[i]);
  for (int i = 0; i < d->num_plans; ++i) {
    cublasLtMatmulDescDestroy(d->plans[i].desc);
    cublasLtMatrixLayoutDestroy(d->plans[i].a);
    cublasLtMatrixLayoutDestroy(d->plans[i].b);
    cublasLtMatrixLayoutDestroy(d->plans[i].d);
  }
  if (d->lt)
    cublasLtDestroy(d->lt);
  if (d->cudnn)
    cudnnDestroy(d->cudnn);
  cudaFree(d->lt_workspace);
  cudaFree(d->scratch);
  cudaFree(d->cudnn_workspace);
  cudaFree(d->slots);
  cudaFree(d->norm_acc);
  cudaFree(d->alloc);
  if (d->host)
    cudaHostUnregister(d->host);
  for (int i = 0; i < SRT_MAX_PENDING; ++i) {
    if (d->pending[i])
      cudaEventDestroy(d->pending[i]);
    cudaFree(d->bucket[i].stage);
  }
  if (d->to_comm)
    cudaEventDestroy(d->to_comm);
  if (d->to_compute)
    cudaEventDestroy(d->to_compute);
  if (d->compute)
    cudaStreamDestroy(d->compute);
  if (d->comm)
    cudaStreamDestroy(d->comm);
  free(d);
}

srt_status srt_cuda_device_open(srt_context *ctx, const srt_program *p, srt_cuda_device **out) {
  *out = NULL;
  srt_cuda_device *d = calloc(1, sizeof *d);
  if (!d)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "cuda backend: no memory for the device state");
  d->ctx = ctx;
  srt_status s = open_local(d, p);
  // Agree before NCCL: a rank whose GPU failed must not leave the others
  // waiting in ncclCommInitRank.
  int32_t failed = s != NULL;
  srt_status c = srt_all_reduce(srt_context_group(ctx, SRT_GROUP_WORLD), &failed, 1, SRT_I32,
                                SRT_REDUCE_MAX);
  if (!s && c)
    s = c;
  else
    srt_status_free(c);
  if (!s && failed)
    s = SRT_ERROR(SRT_UNAVAILABLE, "cuda backend: another rank could not open its GPU");
  if (!s)
    s = open_comms(d);
  if (s) {
    // Nothing ran on the device yet (no cuDNN plan was made): wait, free.
    if (d->compute)
      srt_status_free(srt_cuda_wait(d, d->compute, "closing the device"));
    srt_cuda_device_free(d);
    return s;
  }
  *out = d;
  return NULL;
}

