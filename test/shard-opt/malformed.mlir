// RUN: not %shard-opt --split-input-file %s 2>&1 | FileCheck %s --implicit-check-not=error:

// Malformed IR: one diagnostic per chunk, at the right line and column of the
// original file, and nothing else. Messages are MLIR's parser's own.

func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: malformed.mlir:[[@LINE+1]]:26: error: expected non-function type
  %0 = "nn.relu2"(%x) : (%y) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// CHECK: malformed.mlir:[[@LINE+1]]:32: error: expected '>' in tensor type
func.func @g(%x: tensor<2x8xf32) {
  return
}

// -----

func.func @h() {
  // CHECK: malformed.mlir:[[@LINE+1]]:3: error: Dialect `foo' not found for custom op 'foo.bar'
  foo.bar
  return
}

// -----

// A truncated file (mlir-opt-22 reports the same line, column and message).
func.func @i() {
  return
// CHECK: malformed.mlir:[[@LINE-1]]:9: error: expected operation name in quotes
