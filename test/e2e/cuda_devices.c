// Prints the number of CUDA devices (0 without a GPU or driver): the probe
// the GPU e2e test and bench/gpu.sh use to skip cleanly.
#include <stdio.h>

#include "shardrt/cuda.h"

int main(void) {
  printf("%d\n", srt_cuda_device_count());
  return 0;
}
