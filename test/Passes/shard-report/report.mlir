// shard-report on small per-rank graphs, every figure worked by hand.
// RUN: %shard-opt --split-input-file --pass-pipeline='builtin.module(shard-report)' %s -o /dev/null 2>&1 | FileCheck %s

// A rowwise linear at tp=2 (its input sliced, its output all-reduced, then
// the bias): parameters w [6, 4] + b [6] = 30 floats, 120 bytes; the input
// [2, 4, 8] 256 bytes; activations: the slice [2, 4, 4] 128 + the linear,
// the all-reduce and the bias_add [2, 4, 6] 192 each = 704 bytes. The
// all-reduce of 192 bytes over 2 ranks sends 2 x 192 x 1/2 = 192 bytes
// (ring); slicing a replicated tensor sends nothing.
// CHECK-LABEL: shard-report: @rowwise, per rank, mesh dp=1 x tp=2
// CHECK-NEXT: parameters 120 bytes  (30 elements in 2 tensors)
// CHECK-NEXT: inputs 256 bytes
// CHECK-NEXT: activations 704 bytes
// CHECK: all_reduce tp 1 192 192
// CHECK-NEXT: all_slice tp 1 256 0
// CHECK-NEXT: total 192
module {
  shard.grid @mesh(shape = 1x2)
  func.func @rowwise(%arg0: tensor<2x4x8xf32>, %arg1: tensor<6x4xf32> {nn.param = "a.weight"}, %arg2: tensor<6xf32> {nn.param = "a.bias"}) -> tensor<2x4x6xf32> {
    %all_slice = shard.all_slice %arg0 on @mesh grid_axes = [1] slice_axis = 2 : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
    %0 = "nn.linear"(%all_slice, %arg1) {nn.module = "a"} : (tensor<2x4x4xf32>, tensor<6x4xf32>) -> tensor<2x4x6xf32>
    %all_reduce = shard.all_reduce %0 on @mesh grid_axes = [1] {nn.module = "a"} : tensor<2x4x6xf32> -> tensor<2x4x6xf32>
    %1 = "nn.bias_add"(%all_reduce, %arg2) {nn.module = "a"} : (tensor<2x4x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
    return %1 : tensor<2x4x6xf32>
  }
}

// -----

// Ring traffic per collective on a 2 x 4 mesh: a reduce-scatter over tp
// sends its input x 3/4 (2048 -> 1536), an all-gather over dp its output x
// 1/2 (1024 -> 512; its payload is the 512-byte input), an all-reduce over
// dp twice its payload x 1/2 (1024 -> 1024). Activations 512 + 1024 + 1024.
// CHECK-LABEL: shard-report: @collectives, per rank, mesh dp=2 x tp=4
// CHECK-NEXT: parameters 0 bytes
// CHECK-NEXT: inputs 2048 bytes
// CHECK-NEXT: activations 2560 bytes
// CHECK: all_reduce dp 1 1024 1024
// CHECK-NEXT: all_gather dp 1 512 512
// CHECK-NEXT: reduce_scatter tp 1 2048 1536
// CHECK-NEXT: total 3072
module {
  shard.grid @mesh(shape = 2x4)
  func.func @collectives(%a: tensor<4x8x16xf32>) -> tensor<8x2x16xf32> {
    %0 = shard.reduce_scatter %a on @mesh grid_axes = [1] scatter_axis = 1 : tensor<4x8x16xf32> -> tensor<4x2x16xf32>
    %1 = shard.all_gather %0 on @mesh grid_axes = [0] gather_axis = 0 : tensor<4x2x16xf32> -> tensor<8x2x16xf32>
    %2 = shard.all_reduce %1 on @mesh grid_axes = [0] : tensor<8x2x16xf32> -> tensor<8x2x16xf32>
    return %2 : tensor<8x2x16xf32>
  }
}
