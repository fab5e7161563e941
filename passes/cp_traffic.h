// The context-parallel traffic of a partitioned step: what its attention
// ops all-gather and reduce-scatter over the cp group (they hold one cp
// rank's queries and need every key: Llama 3's all-gather context
// parallelism), for the memory report and shard-opt --report.
#ifndef SHARD_PASSES_CP_TRAFFIC_H
#define SHARD_PASSES_CP_TRAFFIC_H

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"

/// Per rank, bytes received (an all-gather's others' shares; a
/// reduce-scatter's others' contributions to this rank's share: both
/// (cp - 1) x the local tensor). Zero without context parallelism.
typedef struct tp_cp_traffic {
  int64_t cp;               ///< the graph's cp size (module attribute nn.cp_size; 1: none)
  int64_t forward_ops;      ///< nn.attention ops (recomputed ones included)
  int64_t backward_ops;     ///< nn.attention_grad ops: the attention layers
  int64_t gather_per_layer; ///< K, V (and segment ids) all-gathered by one forward
  int64_t grad_per_layer;   ///< dK, dV reduce-scattered by one backward (which
                            ///< all-gathers K, V again: gather_per_layer more)
  int64_t step;             ///< every attention op's traffic of one step
} tp_cp_traffic;

/// The cp traffic of partitioned step `func` in `module`, K/V and their
/// gradients `kv_bytes` per element (4 on the cpu, 2 under bf16), segment
/// ids 8 per token.
tp_cp_traffic tp_cp_traffic_of(MlirOperation module, MlirOperation func, int64_t kv_bytes);

#endif // SHARD_PASSES_CP_TRAFFIC_H
