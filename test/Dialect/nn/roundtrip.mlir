// RUN: %shard-opt %s | %shard-opt | FileCheck %s
// RUN: %shard-opt --nn-verify %s | FileCheck %s

// Every nn op parses, verifies, prints and parses back unchanged.

// CHECK-LABEL: func.func @embedding
// CHECK: "nn.embedding"(%arg0, %arg1) <{scale = 3.200000e+01 : f64}> {nn.module = "model.embed_tokens"} : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x8x64xf32>
func.func @embedding(%ids: tensor<2x8xi64>, %w: tensor<256x64xf32>) -> tensor<2x8x64xf32> {
  %0 = "nn.embedding"(%ids, %w) {scale = 32.0 : f64, nn.module = "model.embed_tokens"} : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}
