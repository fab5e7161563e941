// The `srt_program shard_program` table a lowered step defines
// (runtime/include/shardrt/program.h): its LLVM struct types, built from
// the same field lists as the C structs (SRT_PROGRAM_FIELDS,
// SRT_PARAM_INFO_FIELDS), and the globals that hold it.
#ifndef SHARD_PASSES_PROGRAM_TABLE_H
#define SHARD_PASSES_PROGRAM_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "llvm_builder.h"
#include "nn.h"
#include "sharding_rules.h"
#include "shardrt/types.h"

/// The LLVM type of srt_param_info.
MlirType tp_param_info_type(lb_builder *b);

/// The LLVM type of srt_program.
MlirType tp_program_type(lb_builder *b);

/// One parameter as the memory plan placed it (byte offsets in the arena).
typedef struct tp_program_param {
  MlirStringRef name; // Hugging Face tensor name (owned by the context)
  int init;           // srt_param_init
  nn_shape local;
  int64_t global[NN_MAX_RANK];
  tp_layout layout;
  int64_t offset, grad, m, v;
  int64_t compute; // the bf16 compute copy (cuda), or -1
  int64_t zero_row; // global row (dim 0) initialised to zero: an embedding's padding_idx, or -1
  int num_tp_blocks; // parts of dim 0 split over tp one by one (nn.tp_blocks), 0: one
  int64_t tp_blocks[SRT_MAX_TP_BLOCKS];
} tp_program_param;

/// Everything the table records.
typedef struct tp_program_desc {
  const char *model; // config.json path
  MlirStringRef config_json;      // its text
  MlirStringRef checkpoint_names; // shardrt/checkpoint_names.h text ("" for none)
  MlirStringRef tokenizer_json;   // tokenizer.json compiled in ("" for none)
  tp_mesh mesh;              // axis 0: dp x cp
  int64_t cp;                // context-parallel size (>= 1)
  int64_t batch, seq, vocab; // global (batch: of a whole step, every micro-batch)
  int accum;                 // micro-batches per step (gradient accumulation), >= 1
  double initializer_range;
  double flops_per_token; // the module's nn.flops_per_token (shard-import's count), or 0
  int64_t arena, persistent, ids_offset, labels_offset;
  int64_t position_ids_offset, segment_ids_offset; // -1: the step takes none
  int64_t offload; // the host-only prefix of the persistent region (--cpu-offload), or 0
  const tp_program_param *params;
  int num_params;
  const char *step;    // the step function's symbol
  bool keep_logits;    // then the logits fields below
  int64_t logits_offset;
  nn_shape logits;     // local [B, S, V]
  const char *backend; // the srt_backend symbol ("srt_cpu_backend", "srt_cuda_backend")
} tp_program_desc;

/// Appends to b's block the globals of the table: the parameter names and
/// the model path (private strings), the srt_param_info array, the external
/// `shard_program`, and a declaration of the backend symbol.
void tp_emit_program_table(lb_builder *b, const tp_program_desc *d);

#endif // SHARD_PASSES_PROGRAM_TABLE_H
