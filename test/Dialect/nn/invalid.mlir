// What IRDL itself rejects, one case per chunk, each at its own line.
// RUN: %shard-opt --split-input-file --verify-diagnostics %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and each error's column (COL).
// RUN: not %shard-opt --split-input-file %s 2>&1 | FileCheck %s --check-prefix=COL

func.func @bad_activation(%g: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // COL: invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'"relu"' does not satisfy the constraint}}
  %0 = "nn.glu"(%g, %g) {nn.module = "mlp", activation = "relu"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @bad_offset(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // COL: invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'2.000000e+00 : f64' does not satisfy the constraint}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "norm", eps = 1.0e-6 : f64, offset = 2.0 : f64, head_dim = 0 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @bad_rope_type() -> tensor<1x4x8xf32> {
  // COL: invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'"yarn"' does not satisfy the constraint}}
  %c:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 1.0e4 : f64, rope_type = "yarn"} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %c#0 : tensor<1x4x8xf32>
}

// -----

func.func @missing_attribute(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // COL: invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.rms_norm' op attribute "eps" is expected but not provided}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "norm", offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @mismatched_types(%a: tensor<2x8xf32>, %b: tensor<2x4xf32>) -> tensor<2x8xf32> {
  // COL: invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{expected 'tensor<2x8xf32>' but got 'tensor<2x4xf32>'}}
  %0 = "nn.add"(%a, %b) {nn.module = "layers.0"} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @wrong_operand_count(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // COL: invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{op expects exactly 1 operands, but got 2}}
  %0 = "nn.relu2"(%x, %x) {nn.module = "mixer"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @unknown_op(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // COL: invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{unregistered operation 'nn.bogus' found in dialect ('nn') that does not allow unknown operations}}
  %0 = "nn.bogus"(%x) {nn.module = "x"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
