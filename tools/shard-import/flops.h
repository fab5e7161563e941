// The model FLOPs of one trained token, counted when the model is imported
// (the program table carries it; the driver's MFU divides by it).
#ifndef SHARD_IMPORT_FLOPS_H
#define SHARD_IMPORT_FLOPS_H

#include <stdint.h>

#include "config.h"
#include "graph.h"

/// Model FLOPs per token of a training step (forward and backward), as
/// torchtitan counts them (get_num_flop_per_token): 6 x the parameters
/// that multiply (all of `model`'s parameters but the embedding, unless
/// `cfg` ties it to the lm_head) + 12 x layers x heads x head_dim x `seq`
/// (attention scores and values, forward and backward; causal masking not
/// discounted), layers being those with attention (full, sliding or
/// NemotronH's '*' blocks), + 21 x Mamba2 layers x mamba_heads x
/// mamba_head_dim x ssm_state (the scan, Megatron-LM's mamba_layer_flops:
/// 7 d_inner N forward, times 3; the softmax of attention scores is not
/// counted). Exact for integers below 2^53 (float64 sums).
double import_flops_per_token(const import_config *cfg, const import_model *model, int64_t seq);

#endif // SHARD_IMPORT_FLOPS_H
