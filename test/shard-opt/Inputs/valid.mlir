func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = "nn.relu2"(%x) {nn.module = "mixer"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
