// A function without gradients (nn-autodiff not run) is refused at it.
// RUN: not %shard-opt --nn-optimizer %s 2>&1 | FileCheck %s
// CHECK: no-gradients.mlir:[[@LINE+1]]:1: error: nn-optimizer: the function returns no gradients: run nn-autodiff first
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
