// The memory a compiled step needs per rank, from its static memory plan:
// what lower-to-runtime reports before anything runs (--memory-report) and
// checks against a device's memory (--device-memory).
#ifndef SHARD_PASSES_MEMORY_REPORT_H
#define SHARD_PASSES_MEMORY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cp_traffic.h"
#include "mlir-c/IR.h"

/// Bytes per rank (every rank runs the same program).
typedef struct tp_memory_figures {
  const char *backend; // "cpu" or "cuda"
  int64_t dp, cp, tp, seq; // seq: the whole sequence (a rank holds seq / cp of it)
  bool fsdp;           // parameters sharded over dp (else replicated over dp)
  int64_t batch;       // sequences of a whole step (every micro-batch, every dp rank)
  int64_t micro_batch; // sequences per rank per micro-batch (the compiled shapes')
  int64_t accum;       // micro-batches per step (1: no gradient accumulation)
  /// The persistent region: fp32 parameters, their gradients and AdamW
  /// moments (m and v), the bf16 compute copies (cuda), input ids and labels.
  int64_t params, grads, moments, compute_copies, inputs, persistent;
  /// --cpu-offload (cuda): the fp32 parameters and moments live in pinned
  /// host memory only (then params and moments above are 0 and persistent
  /// is the device's part), beside the host's staging mirror of the
  /// device's persistent part (gradients in, bf16 copies out); host_total
  /// is all three.
  bool cpu_offload;
  int64_t host_params, host_moments, host_staging, host_total;
  /// Temporaries: the planned region (arena - persistent, buffers reused
  /// once dead, first fit), and the most bytes live at one op with what they
  /// are: made by forward ops (activations saved for the backward, the
  /// collectives between them), by backward ops, by the optimizer, and
  /// parameters gathered over dp for their layer (FSDP).
  int64_t temporaries, peak_live, peak_forward, peak_backward, peak_optimizer, peak_gathered;
  int64_t gathered_max; // the most gathered parameter bytes live at any op
  char peak_module[128]; // the nn.module of the op at the peak ("" if none)
  /// The ops' own scratch, outside the plan: the largest known one (the cpu
  /// Mamba2 kernels', counted for one thread; with param-dtype bf16 on the
  /// cpu, plus the largest op's fp32 copies of its bf16 buffers), 0 where
  /// none is known.
  int64_t workspace;
  int64_t total; // persistent + temporaries + workspace
  tp_cp_traffic cp_traffic; // the attention's K/V traffic over cp (cp > 1)
} tp_memory_figures;

/// The figures as a JSON object (malloc'ed, NUL-terminated; NULL when out of
/// memory): persistent_bytes with its parts, temporaries_peak_bytes with
/// what is live at the peak, workspace_bytes, total_bytes (the device's, or
/// the cpu backend's host memory), backend, mesh, batch, seq, cpu_offload
/// and, with it, "host": pinned_bytes with its parts.
char *tp_memory_report_json(const tp_memory_figures *f);

/// A readable summary of the figures, lines of "  name  bytes (GiB)", into
/// buf (NUL-terminated, truncated to size).
void tp_memory_report_text(const tp_memory_figures *f, char *buf, size_t size);

/// Checks the figures against a device of `device_bytes` (0: no limit) and
/// writes the report: the summary on stderr and the JSON to `path` (NULL or
/// "": neither) through the one output writer (srt_write_file: a temporary
/// renamed over the file). Returns false after reporting the error at `at`
/// (tp_error, `pass`): a total over the device's bytes (with the summary),
/// or a file that cannot be written.
bool tp_memory_report_emit(const tp_memory_figures *f, const char *path, int64_t device_bytes,
                           MlirOperation at, const char *pass);

#endif // SHARD_PASSES_MEMORY_REPORT_H
