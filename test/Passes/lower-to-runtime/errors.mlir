// lower-to-runtime's refusals: each error is located at the op it lowers
// (its line here; its config key when imported) and names the op's
// Hugging Face module; no crash on ops it does not know.
// RUN: not %shard-opt --split-input-file --pass-pipeline='builtin.module(lower-to-runtime)' %s 2>&1 | FileCheck %s

// An nn op with no runtime op (the Mamba2 mixer has no kernel yet).
module {
  shard.grid @mesh(shape = 1x1)
  func.func @mamba(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32> {nn.param = "in.weight"}, %cw: tensor<48x1x4xf32> {nn.param = "cw"},
                   %cb: tensor<48xf32> {nn.param = "cb"}, %dt: tensor<4xf32> {nn.param = "dt"}, %a: tensor<4xf32> {nn.param = "a"}, %d: tensor<4xf32> {nn.param = "d"},
                   %nw: tensor<32xf32> {nn.param = "nw"}, %out: tensor<32x32xf32> {nn.param = "out"}) -> tensor<1x8x32xf32> {
    // CHECK: errors.mlir:[[@LINE+1]]:10: error: lower-to-runtime: 'backbone.layers.0.mixer': no lowering for 'nn.mamba2_mixer'
    %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
    return %y : tensor<1x8x32xf32>
  }
}

// -----

// An op of another dialect (once a crash: it was read as a collective).
module {
  shard.grid @mesh(shape = 1x1)
  func.func @constant(%ids: tensor<2x4xi64>) -> tensor<4xf32> {
    // CHECK: errors.mlir:[[@LINE+1]]:10: error: lower-to-runtime: no lowering for 'arith.constant'
    %c = arith.constant dense<1.0> : tensor<4xf32>
    return %c : tensor<4xf32>
  }
}

// -----

// A collective over both mesh axes at once has no runtime op.
module {
  shard.grid @mesh(shape = 2x2)
  func.func @two_axes(%ids: tensor<2x4xi64>, %w: tensor<4x8xf32> {nn.param = "w"}) -> tensor<4x8xf32> {
    // CHECK: errors.mlir:[[@LINE+1]]:10: error: lower-to-runtime: 'proj': a collective over other than one grid axis is not supported
    %r = shard.all_reduce %w on @mesh grid_axes = [0, 1] {nn.module = "proj"} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
}

// -----

// A step must end with the optimizer.
module {
  shard.grid @mesh(shape = 1x1)
  // CHECK: errors.mlir:[[@LINE+1]]:3: error: lower-to-runtime: the step has no nn.optimizer_step: run nn-autodiff and nn-optimizer first
  func.func @forward_only(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>, %emb: tensor<16x8xf32> {nn.param = "e"}) -> tensor<2x4x8xf32> {
    %0 = "nn.embedding"(%ids, %emb) {nn.module = "model.embed_tokens", scale = 1.0 : f64} : (tensor<2x4xi64>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
}

// -----

// Not partitioned: no grid.
// CHECK: errors.mlir:[[@LINE+1]]:1: error: lower-to-runtime: expected a partitioned training step
module {
  func.func @plain(%ids: tensor<2x4xi64>) -> tensor<2x4xi64> {
    return %ids : tensor<2x4xi64>
  }
}
