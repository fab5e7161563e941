// Upstream pipelines run through shard-opt unchanged: sharding propagation
// and partitioning of an upstream `shard` example give exactly the IR that
// mlir-opt-22 gives.
// RUN: %shard-opt --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' %s > %t.ours
// RUN: %mlir-opt --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' %s > %t.ref
// RUN: diff %t.ours %t.ref
// RUN: FileCheck %s < %t.ours

shard.grid @grid(shape = 2)

// A matmul whose contracting dim is split: partial sums, then one all-reduce.
// CHECK-LABEL: func.func @matmul_split_k
// CHECK-SAME: (%arg0: tensor<4x4xf32>, %arg1: tensor<4x6xf32>)
// CHECK: linalg.matmul
// CHECK: shard.all_reduce %{{.*}} on @grid grid_axes = [0] : tensor<4x6xf32> -> tensor<4x6xf32>
func.func @matmul_split_k(%arg0: tensor<4x8xf32>, %arg1: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %s0 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s0 : tensor<4x8xf32>
  %s1 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %1 = shard.shard %arg1 to %s1 : tensor<8x6xf32>
  %2 = tosa.tanh %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %3 = linalg.matmul ins(%2, %1 : tensor<4x8xf32>, tensor<8x6xf32>) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %s2 = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %4 = shard.shard %3 to %s2 : tensor<4x6xf32>
  return %4 : tensor<4x6xf32>
}

// An elementwise op on a row-sharded tensor: stays local, no collective.
// CHECK-LABEL: func.func @elementwise_rows
// CHECK-SAME: (%arg0: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: shard.all_
// CHECK: return
func.func @elementwise_rows(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<8x8xf32>
  %1 = tosa.tanh %0 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = shard.shard %1 to %s : tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
