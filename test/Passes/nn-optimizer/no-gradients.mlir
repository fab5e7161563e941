// A function without gradients (nn-autodiff not run) is refused at it.
// RUN: %shard-opt --verify-diagnostics --nn-optimizer %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and the error's column (COL).
// RUN: not %shard-opt --nn-optimizer %s 2>&1 | FileCheck %s --check-prefix=COL
// COL: no-gradients.mlir:[[@LINE+2]]:1: error:
// expected-error @+1 {{nn-optimizer: the function returns no gradients: run nn-autodiff first}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
