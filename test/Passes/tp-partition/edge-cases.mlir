// Edge cases of partitioning, each once broke (found by review).

// A rowwise linear's bias is added once, after the reduction, and keeps the
// linear's module.
// RUN: %shard-opt --split-input-file --tp-plan=%S/Inputs/rowwise-a.json --tp-size=2 %s 2>&1 | FileCheck %s
// tp=1: no collective at all.
// RUN: %shard-opt --split-input-file --tp-plan=%S/Inputs/rowwise-a.json --tp-size=1 %s 2>&1 | FileCheck %s --check-prefix=ONE

// CHECK-LABEL: func.func @rowwise_bias
// CHECK: shard.all_slice {{.*}} slice_axis = 2 : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
// CHECK: %[[P:.*]] = "nn.linear"(%{{.*}}, %arg1) {nn.module = "a"} : (tensor<2x4x4xf32>, tensor<6x4xf32>) -> tensor<2x4x6xf32>
// CHECK: %[[R:.*]] = shard.all_reduce %[[P]] on @mesh grid_axes = [1] {nn.module = "a"}
// CHECK: "nn.bias_add"(%[[R]], %arg2) {nn.module = "a"}
// ONE-LABEL: func.func @rowwise_bias
// ONE-NOT: shard.all
// ONE: return
func.func @rowwise_bias(%x: tensor<2x4x8xf32>, %w: tensor<6x8xf32> {nn.param = "a.weight"}, %b: tensor<6xf32> {nn.param = "a.bias"}) -> tensor<2x4x6xf32> {
  %0 = "nn.linear"(%x, %w, %b) {nn.module = "a"} : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  return %0 : tensor<2x4x6xf32>
}

// -----

// Declarations are left alone.
// CHECK: func.func private @declared(tensor<4xf32>) -> tensor<4xf32>
func.func private @declared(tensor<4xf32>) -> tensor<4xf32>
