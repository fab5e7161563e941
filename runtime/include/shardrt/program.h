// The contract between a compiled training step (an object file emitted by
// shard-compile from the partitioned graph) and the runtime's training
// driver: the program's static memory plan, its parameter table and its
// step function. Generated code defines one `srt_program` named
// `shard_program`; runtime/src/train/ links against it.
#ifndef SHARDRT_PROGRAM_H
#define SHARDRT_PROGRAM_H

#include <stdint.h>

#include "shardrt/context.h"
#include "shardrt/status.h"
#include "shardrt/types.h"

/// Bumped whenever the layout of the structs below changes; the driver
/// refuses a program built for another version.
#define SRT_PROGRAM_ABI 3

/// What generated code runs against: the context (mesh, groups) and this
/// rank's arena. Every buffer of the program is at a static byte offset
/// from `arena` (the memory plan), 64-byte aligned. On the cpu backend the
/// arena is host memory and `device` is NULL; on a device backend the arena
/// is device memory and `device` the backend's state (srt_backend.open).
typedef struct srt_exec {
  srt_context *ctx;
  uint8_t *arena;
  void *device;
} srt_exec;

struct srt_program;

/// A device backend: how the driver moves the host's copy of the persistent
/// region (parameters, gradients, moments, input ids and labels; the driver
/// initialises, loads, saves and dumps it on the host) to and from the
/// device arena. The cpu backend has none (srt_program.backend is NULL): its
/// host arena is the arena. Every function returns NULL or the error of the
/// failing device call, naming the call and its location.
typedef struct srt_backend {
  const char *name; // "cuda"
  /// Allocates this rank's device arena (program->arena_bytes) and the
  /// backend's state (device, streams, library handles, communicators):
  /// collective over the context's world.
  srt_status (*open)(srt_context *ctx, const struct srt_program *program, void **device,
                     uint8_t **arena);
  /// Copies host bytes [offset, offset + bytes) of the persistent region to
  /// the same offsets of the device arena. When the range holds parameters,
  /// their compute copies are refreshed too.
  srt_status (*to_device)(void *device, const struct srt_program *program,
                          const uint8_t *host, int64_t offset, int64_t bytes);
  /// Copies device bytes [offset, offset + bytes) to the host (waits).
  srt_status (*to_host)(void *device, const struct srt_program *program, uint8_t *host,
                        int64_t offset, int64_t bytes);
  /// Frees what open allocated (NULL device: nothing).
  srt_status (*close)(void *device);
} srt_backend;

/// One parameter (a Hugging Face tensor) as this rank holds it: fp32, its
/// local shard at `offset`, its gradient at `grad_offset` and the AdamW
/// moments at `m_offset` / `v_offset` (all byte offsets into the arena, in
/// the persistent region that the step never reuses).
/// How a parameter starts when no checkpoint is loaded (Hugging Face's
/// _init_weights): normal(0, initializer_range), zeros (biases, Gemma's
/// (1 + w) norms) or ones (other norms).
typedef enum srt_param_init { SRT_INIT_NORMAL, SRT_INIT_ZEROS, SRT_INIT_ONES } srt_param_init;

typedef struct srt_param_info {
  const char *name;       // e.g. "model.layers.0.self_attn.q_proj.weight"
  int32_t init;           // srt_param_init
  int32_t rank;
  int64_t global_shape[SRT_MAX_RANK];
  int64_t local_shape[SRT_MAX_RANK];
  srt_placement placement[2]; // [dp, tp]
  int64_t offset, grad_offset, m_offset, v_offset;
  int64_t compute_offset;
} srt_param_info;

/// Hyper-parameters of one optimizer step (torch.optim.AdamW names) and of
/// gradient clipping (NeMo-RL's clip_grad_by_total_norm_).
typedef struct srt_step_options {
  int64_t step;        // 1-based, for AdamW's bias correction
  float lr, beta1, beta2, eps, weight_decay;
  float max_grad_norm; // <= 0: no clipping
  double norm_type;    // 1, 2, any p > 0, or INFINITY
} srt_step_options;

/// What one step reports. `skipped` is set when the gradient norm was not
/// finite: no parameter or moment changed.
typedef struct srt_step_result {
  float loss;
  double grad_norm;
  int skipped;
} srt_step_result;

/// A compiled training step.
typedef struct srt_program {
  int32_t abi;                     // SRT_PROGRAM_ABI
  const char *model;               // config.json path it was compiled from
  int64_t dp, tp;                  // mesh it was partitioned for
  int64_t batch, seq;              // global batch and sequence length
  int64_t local_batch;             // batch / dp
  int64_t vocab;                   // vocabulary size (token ids < vocab)
  double initializer_range;        // std of Hugging Face's normal init
  int64_t arena_bytes;             // whole arena, bytes
  int64_t persistent_bytes;        // params, grads, moments: [0, persistent)
  int64_t input_ids_offset;        // int64 [local_batch, seq]
  int64_t labels_offset;           // int64 [local_batch, seq]
  int32_t num_params;
  const srt_param_info *params;
  /// Forward, backward and the optimizer step (grad norm with each gradient
  /// counted once, clipping, AdamW) on this rank's arena. Returns the first
  /// error of any runtime call.
  srt_status (*step)(srt_exec *exec, const srt_step_options *options,
                     srt_step_result *result);
  /// The logits: the output of the linear whose nn.module is "lm_head",
  /// global shape [batch, seq, vocab], as this rank holds it after a step.
  /// Only kept when compiled with `shard-compile --keep-logits`
  /// (lower-to-runtime{keep-logits=true}), which pins the buffer to the end
  /// of the step instead of letting later ops reuse it; otherwise
  /// `logits_kept` is 0 and the other fields are unused.
  int32_t logits_kept;
  int64_t logits_offset;              // byte offset into the arena
  int64_t logits_local_shape[3];      // [local_batch or batch, seq or seq/tp, vocab or vocab/tp]
  srt_placement logits_placement[2];  // [dp, tp]: Shard(0) on dp, Shard(2) for a vocab split
  /// The device backend the step was lowered for (lower-to-runtime{backend})
  /// or NULL for the cpu backend.
  const srt_backend *backend;
} srt_program;

#endif // SHARDRT_PROGRAM_H
