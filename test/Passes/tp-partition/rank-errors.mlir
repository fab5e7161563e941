// Ops of ranks the rules do not name are refused, not mis-partitioned.
// RUN: %shard-opt --split-input-file --verify-diagnostics --tp-plan=%S/Inputs/colwise-a.json --tp-size=2 %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and the first error's column (COL).
// RUN: not %shard-opt --split-input-file --tp-plan=%S/Inputs/colwise-a.json --tp-size=2 %s 2>&1 | FileCheck %s --check-prefix=COL

func.func @rank5(%x: tensor<1x1x2x4x8xf32>, %w: tensor<6x8xf32> {nn.param = "a.weight"}) -> tensor<1x1x2x4x6xf32> {
  // COL: rank-errors.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{tp-partition: 'a': no sharding rule for nn.linear with a rank-5 operand 0 (expected rank 3)}}
  %0 = "nn.linear"(%x, %w) {nn.module = "a"} : (tensor<1x1x2x4x8xf32>, tensor<6x8xf32>) -> tensor<1x1x2x4x6xf32>
  return %0 : tensor<1x1x2x4x6xf32>
}

// -----

// A graph already partitioned is not partitioned again.
// expected-error @below {{tp-plan: the function is already partitioned (its arguments carry nn.placements)}}
func.func @twice(%x: tensor<2x4x8xf32> {nn.placements = ["Replicate", "Replicate"]}) -> tensor<2x4x8xf32> {
  return %x : tensor<2x4x8xf32>
}
