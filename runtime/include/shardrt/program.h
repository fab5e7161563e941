// The contract between a compiled training step (an object file emitted by
// shard-compile from the partitioned graph) and the runtime's training
// driver: the program's static memory plan, its parameter table and its
// step function. Generated code defines one `srt_program` named
// `shard_program`; runtime/src/train/ links against it.
#ifndef SHARDRT_PROGRAM_H
#define SHARDRT_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The runtime context (shardrt/context.h), opaque here: a compiled step
// and the compiler need no MPI headers.
typedef struct srt_context srt_context;
#include "shardrt/status.h"
#include "shardrt/types.h"

/// Bumped whenever the layout of the structs below changes; the driver
/// refuses a program built for another version.
#define SRT_PROGRAM_ABI 12

/// What generated code runs against: the context (mesh, groups) and this
/// rank's arena. Every buffer of the program is at a static byte offset
/// from `arena` (the memory plan), 64-byte aligned. On the cpu backend the
/// arena is host memory and `device` is NULL; on a device backend the arena
/// is device memory and `device` the backend's state (srt_backend.open).
struct srt_backend;
struct srt_ops;
struct srt_program;

typedef struct srt_exec {
  srt_context *ctx;
  uint8_t *arena;
  void *device;
  /// The backend whose ops run (srt_op_X calls backend->ops): never NULL;
  /// the cpu's is srt_cpu_backend (shardrt/cpu.h).
  const struct srt_backend *backend;
  /// 1 when the driver knows every row of the current batch to be one
  /// document (segment ids all 0): an attention may then ignore its
  /// segment ids (the cuda backend keeps cuDNN's fused attention, which
  /// has no document mask). 0: unknown, the segment ids are applied.
  int32_t one_document;
} srt_exec;

/// A device backend: how the driver moves the host's copy of the persistent
/// region (parameters, gradients, moments, input ids and labels; the driver
/// initialises, loads, saves and dumps it on the host) to and from the
/// device arena. The cpu backend's (srt_cpu_backend) copies nothing: its
/// host arena is the arena. The host copy is the context's arena
/// (srt_context_arena, persistent_bytes long); offsets are the same on both
/// sides.
///
/// With --cpu-offload (srt_program.offload_bytes > 0) the persistent
/// region's prefix [0, offload_bytes) holds the fp32 master weights and the
/// AdamW moments on the host only (pinned by open; the optimizer steps them
/// there); the device holds [offload_bytes, arena_bytes) and copies skip the
/// prefix. Every function returns NULL or the error of the failing device
/// call, naming the call and its location.
typedef struct srt_backend {
  const char *name; // "cuda"
  /// Its op entry points (shardrt/ops.h).
  const struct srt_ops *ops;
  /// Allocates this rank's device arena (program->arena_bytes) and the
  /// backend's state (device, streams, library handles, communicators):
  /// collective over the context's world.
  srt_status (*open)(srt_context *ctx, const struct srt_program *program, void **device,
                     uint8_t **arena);
  /// Copies host bytes [offset, offset + bytes) of the persistent region to
  /// the same offsets of the device arena. When the range holds parameters,
  /// their compute copies are refreshed too (from the host's master weights
  /// with --cpu-offload).
  srt_status (*to_device)(void *device, const struct srt_program *program,
                          const uint8_t *host, int64_t offset, int64_t bytes);
  /// Copies device bytes [offset, offset + bytes) to the host (waits).
  srt_status (*to_host)(void *device, const struct srt_program *program, uint8_t *host,
                        int64_t offset, int64_t bytes);
  /// Frees what open allocated (NULL device: nothing).
  srt_status (*close)(void *device);
  /// This rank's device's dense bf16 peak in FLOP/s (the MFU denominator),
  /// and in `source` (of `size` bytes) where the figure comes from; NULL
  /// for a backend that knows none (MFU is then not shown).
  srt_status (*peak_flops)(void *device, double *flops, char *source, size_t size);
  /// True for the cpu backend (srt_cpu_backend): it computes in the host
  /// arena itself with the host's OpenMP threads (open hands back the
  /// context's arena, the copies and close do nothing), so the program's
  /// whole arena is host memory. False for a device backend, whose arena
  /// is its own and the host keeps the persistent region.
  bool host;
} srt_backend;

/// One parameter (a Hugging Face tensor) as this rank holds it: fp32, its
/// local shard at `offset`, its gradient at `grad_offset` and the AdamW
/// moments at `m_offset` / `v_offset` (all byte offsets into the arena, in
/// the persistent region that the step never reuses).
/// How a parameter starts when no checkpoint is loaded (Hugging Face's
/// _init_weights): normal(0, initializer_range), zeros (biases, Gemma's
/// (1 + w) norms) or ones (other norms, a Mamba2 mixer's D); a Mamba2
/// mixer's A_log is log(1), log(2), ... log(heads) (by global head), its
/// dt_bias the inverse softplus of dt = exp(u (ln time_step_max - ln
/// time_step_min) + ln time_step_min), u uniform in (0, 1], clamped below at
/// time_step_floor (NemotronHPreTrainedModel._init_weights).
typedef enum srt_param_init {
  SRT_INIT_NORMAL,
  SRT_INIT_ZEROS,
  SRT_INIT_ONES,
  SRT_INIT_A_LOG,
  SRT_INIT_DT_BIAS,
} srt_param_init;

// The fields of srt_param_info and srt_program, in order, as field lists:
// the structs below are declared from them, and lower-to-runtime builds the
// LLVM struct types of the `shard_program` table it emits from the same
// lists (a unit test compares their sizes and offsets). F(kind, name) is a
// scalar field, A(kind, name, n) an array of n; kinds are I32, I64, F64,
// PLACEMENT (srt_placement: two i32) and the pointers STR (const char *),
// PARAMS, STEP and BACKEND (SRT_FIELD_TYPE_<kind> gives each C type).
#define SRT_PARAM_INFO_FIELDS(F, A)                                                      \
  F(STR, name)                       /* e.g. "model.layers.0.self_attn.q_proj.weight" */ \
  F(I32, init)                       /* srt_param_init */                                \
  F(I32, rank)                                                                           \
  A(I64, global_shape, SRT_MAX_RANK)                                                     \
  A(I64, local_shape, SRT_MAX_RANK)                                                      \
  A(PLACEMENT, placement, 2)         /* [dp, tp] */                                      \
  F(I64, offset) F(I64, grad_offset) F(I64, m_offset) F(I64, v_offset)                   \
  F(I64, compute_offset)             /* the bf16 compute copy (cuda), or -1 */          \
  F(I64, zero_row)                   /* global row that starts at 0 (padding_idx), -1 */ \
  F(I32, num_tp_blocks)              /* parts of a Shard(0) on tp (0: one): */           \
  A(I64, tp_blocks, SRT_MAX_TP_BLOCKS) /* dim 0's parts, each split over tp */

#define SRT_PROGRAM_FIELDS(F, A)                                                         \
  F(I32, abi)                        /* SRT_PROGRAM_ABI */                               \
  F(STR, model)                      /* config.json path it was compiled from */        \
  F(STR, config_json)                /* that file's text, as compiled (exports) */       \
  F(STR, checkpoint_names)           /* layouts, carried modules: checkpoint_names.h */ \
  F(STR, tokenizer_json)             /* tokenizer.json beside the config when compiled, */ \
                                     /* checked against vocab ("": none) */              \
  F(I64, dp) F(I64, tp)              /* mesh it was partitioned for */                   \
  F(I64, cp)                         /* context parallelism (0 or 1: none); placements' */ \
                                     /* axis 0 is dp x cp, inputs [local_batch, seq/cp] */ \
  F(I64, batch) F(I64, seq)          /* global batch and sequence length */              \
  F(I64, local_batch)                /* batch / dp / grad_accum_steps */                 \
  F(I32, grad_accum_steps)           /* micro-batches per step (1: one) */              \
  F(I64, vocab)                      /* vocabulary size (token ids < vocab) */           \
  F(F64, initializer_range)          /* std of Hugging Face's normal init */             \
  F(F64, flops_per_token)            /* model FLOPs of a trained token (MFU), 0: unknown */ \
  F(I64, arena_bytes)                /* whole arena, bytes */                            \
  F(I64, persistent_bytes)           /* params, grads, moments: [0, persistent) */       \
  F(I64, offload_bytes)              /* host-only [0, offload): --cpu-offload, else 0 */  \
  F(I64, input_ids_offset)           /* int64 [local_batch, seq] */                      \
  F(I64, labels_offset)              /* int64 [local_batch, seq] */                      \
  F(I64, position_ids_offset)        /* int64 [local_batch, seq] rotary positions, */    \
                                     /* -1: the step takes none */                       \
  F(I64, segment_ids_offset)         /* int64 [local_batch, seq] documents (-1 padding), */ \
                                     /* -1: the step takes none */                       \
  F(I32, num_params)                                                                     \
  F(PARAMS, params)                                                                      \
  F(STEP, step)                                                                          \
  F(I32, logits_kept)                                                                    \
  F(I64, logits_offset)              /* byte offset into the arena */                    \
  A(I64, logits_local_shape, 3)      /* [local_batch or batch, seq or seq/tp, ...] */    \
  A(PLACEMENT, logits_placement, 2)  /* [dp, tp] */                                      \
  F(BACKEND, backend)

struct srt_param_info;
struct srt_step_options;
struct srt_step_result;

/// Forward, backward and the optimizer step (grad norm with each gradient
/// counted once, clipping, AdamW) on this rank's arena. Returns the first
/// error of any runtime call.
typedef srt_status (*srt_step_fn)(srt_exec *exec, const struct srt_step_options *options,
                                  struct srt_step_result *result);

#define SRT_FIELD_TYPE_I32 int32_t
#define SRT_FIELD_TYPE_I64 int64_t
#define SRT_FIELD_TYPE_F64 double
#define SRT_FIELD_TYPE_PLACEMENT srt_placement
#define SRT_FIELD_TYPE_STR const char *
#define SRT_FIELD_TYPE_PARAMS const struct srt_param_info *
#define SRT_FIELD_TYPE_STEP srt_step_fn
#define SRT_FIELD_TYPE_BACKEND const srt_backend *
#define SRT_FIELD_DECLARE(kind, name) SRT_FIELD_TYPE_##kind name;
#define SRT_ARRAY_DECLARE(kind, name, n) SRT_FIELD_TYPE_##kind name[n];

typedef struct srt_param_info {
  SRT_PARAM_INFO_FIELDS(SRT_FIELD_DECLARE, SRT_ARRAY_DECLARE)
} srt_param_info;

/// Hyper-parameters of one optimizer step (torch.optim.AdamW names) and of
/// gradient clipping (NeMo-RL's clip_grad_by_total_norm_).
typedef struct srt_step_options {
  int64_t step;        // 1-based, for AdamW's bias correction
  float lr, beta1, beta2, eps, weight_decay;
  float max_grad_norm; // <= 0: no clipping
  double norm_type;    // 1, 2, any p > 0, or INFINITY
  // 1: an evaluation: the step stops after the loss (the compiled step
  // branches to the optimizer op right after it; srt_step_forward_only),
  // reports it and changes no parameter, moment or step count.
  int32_t forward_only;
  // Gradient accumulation (a program of grad_accum_steps > 1): 1 on every
  // micro-batch but the last: grad_accum += accum_weight x the gradients,
  // then the step returns (loss reported, nothing else changes); 2 on the
  // last: every gradient becomes (grad_accum + accum_weight x it) /
  // accum_total, then the step goes on as usual (norm, clipping, AdamW).
  // accum_weight: the micro-batch's scored labels over dp; accum_total: the
  // whole batch's. grad_accum: the driver's buffer, each parameter's local
  // gradient elements one after another in parameter order; 0: no
  // accumulation.
  int32_t accumulate;
  float accum_weight, accum_total;
  float *grad_accum;
} srt_step_options;

/// Whether `options` asks for the forward only (compiled steps call it
/// after the loss): 1 or 0.
int64_t srt_step_forward_only(const srt_step_options *options);

/// What one step reports. `skipped` is set when the gradient norm was not
/// finite: no parameter or moment changed.
typedef struct srt_step_result {
  float loss;
  double grad_norm;
  int skipped;
} srt_step_result;

/// A compiled training step (fields: SRT_PROGRAM_FIELDS). `step` runs it.
/// The logits (the output of the linear whose nn.module is "lm_head",
/// global shape [batch, seq, vocab], as this rank holds it after a step)
/// are kept only when compiled with `shard-compile --keep-logits`
/// (lower-to-runtime{keep-logits=true}), which pins the buffer to the end
/// of the step instead of letting later ops reuse it; otherwise
/// `logits_kept` is 0 and the logits fields are unused. `backend` is the
/// backend the step was lowered for (lower-to-runtime{backend}):
/// srt_cpu_backend or srt_cuda_backend, never NULL.
typedef struct srt_program {
  SRT_PROGRAM_FIELDS(SRT_FIELD_DECLARE, SRT_ARRAY_DECLARE)
} srt_program;

#endif // SHARDRT_PROGRAM_H
