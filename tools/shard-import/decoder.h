// The transformer decoder stack of Llama, Qwen2, Qwen3 and Gemma3
// (decoder.c), and its self-attention block, which Nemotron-H's attention
// layers reuse.
#ifndef SHARD_IMPORT_DECODER_H
#define SHARD_IMPORT_DECODER_H

#include <stdint.h>

#include "graph.h"
#include "mlir-c/IR.h"

/// The decoder layers: takes the embedding output and returns the hidden
/// state before the final norm.
MlirValue import_build_decoder(import_graph *g, MlirValue x);

/// Self-attention under module `base` ("...layers.N.self_attn"): q/k/v
/// projections, optional q/k norms, RoPE when `cos` is non-null (pointing at
/// the rotary tuple), nn.attention with `window` (0 = full), o_proj.
MlirValue import_build_attention(import_graph *g, const char *base, MlirValue h,
                                 const MlirValue *cos, const MlirValue *sin,
                                 int64_t window);

#endif // SHARD_IMPORT_DECODER_H
