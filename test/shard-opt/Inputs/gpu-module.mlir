module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%a: f32) kernel {
      %b = arith.addf %a, %a : f32
      gpu.return
    }
  }
}
