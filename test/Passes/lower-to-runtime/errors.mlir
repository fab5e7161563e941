// lower-to-runtime's refusals: each error is located at the op it lowers
// (its line here; its config key when imported) and names the op's
// Hugging Face module; no crash on ops it does not know.
// RUN: %shard-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(lower-to-runtime)' %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and each error's column (COL).
// RUN: not %shard-opt --split-input-file --pass-pipeline='builtin.module(lower-to-runtime)' %s 2>&1 | FileCheck %s --check-prefix=COL

// An op of another dialect (once a crash: it was read as a collective).
module {
  shard.grid @mesh(shape = 1x1)
  func.func @constant(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>) -> tensor<4xf32> {
    // COL: errors.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: no lowering for 'arith.constant'}}
    %c = arith.constant dense<1.0> : tensor<4xf32>
    return %c : tensor<4xf32>
  }
}

// -----

// A collective over both mesh axes at once has no runtime op.
module {
  shard.grid @mesh(shape = 2x2)
  func.func @two_axes(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4x8xf32> {nn.init = "normal", nn.param = "w"}) -> tensor<4x8xf32> {
    // COL: errors.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: 'proj': a collective over other than one grid axis is not supported}}
    %r = shard.all_reduce %w on @mesh grid_axes = [0, 1] {nn.module = "proj"} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
}

// -----

// A step must end with the optimizer.
module {
  shard.grid @mesh(shape = 1x1)
  // COL: errors.mlir:[[@LINE+2]]:3: error:
  // expected-error @+1 {{lower-to-runtime: the step has no nn.optimizer_step: run nn-autodiff and nn-optimizer first}}
  func.func @forward_only(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %emb: tensor<16x8xf32> {nn.init = "normal", nn.param = "e"}) -> tensor<2x4x8xf32> {
    %0 = "nn.embedding"(%ids, %emb) {padding_idx = -1 : i64, nn.module = "model.embed_tokens", scale = 1.0 : f64} : (tensor<2x4xi64>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
}

// -----

// Not partitioned: no grid.
// COL: errors.mlir:[[@LINE+2]]:1: error:
// expected-error @+1 {{lower-to-runtime: expected a partitioned training step}}
module {
  func.func @plain(%ids: tensor<2x4xi64>) -> tensor<2x4xi64> {
    return %ids : tensor<2x4xi64>
  }
}

// -----

// Malformed hand-written steps get a diagnostic, not a crash: an argument
// attribute nn.param that is not a string,
module {
  shard.grid @mesh(shape = 1x1)
  // COL: errors.mlir:[[@LINE+2]]:3: error:
  // expected-error @+1 {{lower-to-runtime: argument 2: nn.param must be a string (the Hugging Face tensor name)}}
  func.func @param_int(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4xf32> {nn.param = 5 : i64}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// a parameter that is not a tensor,
module {
  shard.grid @mesh(shape = 1x1)
  // COL: errors.mlir:[[@LINE+2]]:3: error:
  // expected-error @+1 {{lower-to-runtime: parameter 'w' must be a statically shaped ranked tensor}}
  func.func @param_scalar(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: i64 {nn.init = "normal", nn.param = "w"}) -> tensor<2x4xi64> {
    return %ids : tensor<2x4xi64>
  }
}

// -----

// placements that are not one string per mesh axis,
module {
  shard.grid @mesh(shape = 1x1)
  // COL: errors.mlir:[[@LINE+2]]:3: error:
  // expected-error @+1 {{lower-to-runtime: parameter 'w': nn.placements must be [dp, tp] placement strings}}
  func.func @placements(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4xf32> {nn.init = "normal", nn.param = "w", nn.placements = ["Replicate"]}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// a parameter without nn.init (shard-import stamps it; hand-written IR must
// say it: the plan does not guess an init from the name),
module {
  shard.grid @mesh(shape = 1x1)
  // COL: errors.mlir:[[@LINE+2]]:3: error:
  // expected-error @+1 {{lower-to-runtime: parameter 'model.norm.weight': nn.init must be one of "normal", "zeros", "ones", "a_log", "dt_bias" (shard-import stamps it)}}
  func.func @no_init(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4xf32> {nn.param = "model.norm.weight"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// or with one the runtime does not know,
module {
  shard.grid @mesh(shape = 1x1)
  // COL: errors.mlir:[[@LINE+2]]:3: error:
  // expected-error @+1 {{lower-to-runtime: parameter 'w': nn.init must be one of "normal", "zeros", "ones", "a_log", "dt_bias" (shard-import stamps it)}}
  func.func @bad_init(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4xf32> {nn.init = 1 : i64, nn.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// a step without input_ids and labels,
module {
  shard.grid @mesh(shape = 1x1)
  // COL: errors.mlir:[[@LINE+2]]:3: error:
  // expected-error @+1 {{lower-to-runtime: the step's first arguments must be input_ids and labels ([batch, seq] int64)}}
  func.func @no_arguments() {
    return
  }
}

// -----

// a gradient handed to no parameter,
module {
  shard.grid @mesh(shape = 1x1)
  func.func @store(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4xf32> {nn.init = "normal", nn.param = "w"}) -> tensor<2x4xi64> {
    %0 = "nn.add"(%w, %w) {nn.module = "m"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // COL: errors.mlir:[[@LINE+2]]:5: error:
    // expected-error @+1 {{lower-to-runtime: 'optimizer': nn.store_grad: nn.grad_of does not name a parameter of the step}}
    "nn.store_grad"(%0) {nn.module = "optimizer"} : (tensor<4xf32>) -> ()
    return %ids : tensor<2x4xi64>
  }
}

// -----

// RoPE with no head_dim (it would divide by zero),
module {
  shard.grid @mesh(shape = 1x1)
  func.func @rope(%ids: tensor<1x4xi64>, %labels: tensor<1x4xi64>, %x: tensor<1x4x8xf32> {nn.init = "normal", nn.param = "x"}) -> tensor<1x4xi64> {
    %c, %s = "nn.rotary_embedding"() {nn.module = "rope", head_dim = 8 : i64, theta = 10000.0 : f64, rope_type = "default"} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
    // COL: errors.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: 'attn': head_dim must be positive}}
    %y = "nn.apply_rotary"(%x, %c, %s) {nn.module = "attn", head_dim = 0 : i64} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    return %ids : tensor<1x4xi64>
  }
}

// -----

// and a collective of the integer input ids.
module {
  shard.grid @mesh(shape = 1x1)
  func.func @int_gather(%ids: tensor<1x4xi64>, %labels: tensor<1x4xi64>) -> tensor<1x4xi64> {
    // COL: errors.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: an add or a collective of integer tensors (input ids, labels) is not supported}}
    %g = shard.all_gather %ids on @mesh grid_axes = [1] gather_axis = 1 : tensor<1x4xi64> -> tensor<1x4xi64>
    return %g : tensor<1x4xi64>
  }
}

// -----

// An nn.wait completes a non-blocking collective: of a collective with no
// non-blocking form, or of a value no collective defines, it is refused.
module {
  shard.grid @mesh(shape = 1x2)
  func.func @wait_all_to_all(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4x8xf32> {nn.init = "normal", nn.param = "w"}) -> tensor<2x16xf32> {
    // COL: errors.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: 'proj': nn.wait of 'shard.all_to_all', which has no non-blocking form (all_reduce, all_gather and reduce_scatter have)}}
    %a = shard.all_to_all %w on @mesh grid_axes = [1] split_axis = 0 concat_axis = 1 {nn.module = "proj"} : tensor<4x8xf32> -> tensor<2x16xf32>
    %b = "nn.wait"(%a) : (tensor<2x16xf32>) -> tensor<2x16xf32>
    return %b : tensor<2x16xf32>
  }
}

// -----

module {
  shard.grid @mesh(shape = 1x1)
  func.func @wait_param(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %w: tensor<4x8xf32> {nn.init = "normal", nn.param = "w"}) -> tensor<4x8xf32> {
    // COL: errors.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: nn.wait of a value no collective of the step defines}}
    %b = "nn.wait"(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %b : tensor<4x8xf32>
  }
}
