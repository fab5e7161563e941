// RUN: %shard-opt --split-input-file --verify-diagnostics --nn-autodiff %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and each error's column (COL).
// RUN: not %shard-opt --split-input-file --nn-autodiff %s 2>&1 | FileCheck %s --check-prefix=COL

// COL: no-loss.mlir:[[@LINE+2]]:1: error:
// expected-error @+1 {{nn-autodiff: the function's first result must be the loss of an nn.cross_entropy}}
func.func @f(%x: tensor<2x8xf32> {nn.param = "w"}) -> tensor<2x8xf32> {
  %0 = "nn.relu2"(%x) {nn.module = "m"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// A parameter that does not reach the loss has no gradient: refused.
// COL: no-loss.mlir:[[@LINE+2]]:1: error:
// expected-error @+1 {{nn-autodiff: parameter 'unused.weight' does not reach the loss: it has no gradient}}
func.func @g(%ids: tensor<1x4xi64>, %w: tensor<16x8xf32> {nn.param = "w"}, %u: tensor<8xf32> {nn.param = "unused.weight"}) -> tensor<f32> {
  %x = "nn.embedding"(%ids, %w) {padding_idx = -1 : i64, nn.module = "embed", scale = 1.0 : f64} : (tensor<1x4xi64>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %l = "nn.linear"(%x, %w) {nn.module = "lm_head"} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %loss = "nn.cross_entropy"(%l, %ids) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<1x4x16xf32>, tensor<1x4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Differentiating twice is refused (it would append a second backward).
func.func @twice(%ids: tensor<1x4xi64>, %w: tensor<16x8xf32> {nn.param = "w"}) -> tensor<f32> {
  %x = "nn.embedding"(%ids, %w) {padding_idx = -1 : i64, nn.module = "embed", scale = 1.0 : f64} : (tensor<1x4xi64>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %l = "nn.linear"(%x, %w) {nn.module = "lm_head"} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %loss = "nn.cross_entropy"(%l, %ids) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<1x4x16xf32>, tensor<1x4xi64>) -> tensor<f32>
  // COL: no-loss.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{nn-autodiff: 'loss': the function already has backward or optimizer ops}}
  %g = "nn.cross_entropy_grad"(%l, %ids) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<1x4x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  return %loss : tensor<f32>
}
