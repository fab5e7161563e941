// GPU test of context parallelism's token moves on the device (cp_layout.h,
// the cuda attention's K/V all-gather and dK/dV reduce-scatter layouts):
// srt_cuda_cp_to_ranks and srt_cuda_cp_to_tokens against the head-tail
// layout written out here from its definition (Megatron-LM's
// get_batch_on_this_cp_rank: a row of seq tokens in 2 x cp chunks of C,
// rank c holding chunk c then chunk 2cp - 1 - c), byte for byte, at cp 2,
// 3 and 4, for bf16 K/V rows of 6 elements (12 bytes per token) and int64
// segment ids (8 bytes), 3 rows of 24 tokens, and one row of 4 tokens at cp
// 2 (chunks of one token). The destination is filled with 0xAB first, so a
// byte the copies miss shows. Without a CUDA device: prints "SKIP: no CUDA
// device" and exits 77.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cp_layout.h"
#include "cuda_test_util.h"

static int g_failures;


static void check(const char *what, int cp, size_t token_bytes, const uint8_t *got,
                  const uint8_t *want, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad += got[i] != want[i];
  printf("%-14s cp%d %2zu bytes/token: %s (%zu of %zu bytes differ)\n", what, cp, token_bytes,
         bad ? "FAILED" : "ok", bad, n);
  g_failures += bad != 0;
}

// Waits for the device's copies, then reads `n` bytes of `dev` into `host`.
static void read_back(uint8_t *host, void *dev, size_t n) {
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
}

// The ranks' local rows [cp][rows, seq/cp, token_bytes] of `tokens`
// [rows, seq, token_bytes], from the layout's definition.
static void reference_ranks(const uint8_t *tokens, int64_t rows, int64_t seq, int cp,
                            size_t token_bytes, uint8_t *ranks) {
  int64_t C = seq / (2 * cp), local = seq / cp;
  for (int c = 0; c < cp; ++c)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < local; ++j) {
        int64_t t = j < C ? c * C + j : (2 * cp - 1 - c) * C + (j - C);
        memcpy(ranks + (size_t)((c * rows + r) * local + j) * token_bytes,
               tokens + (size_t)(r * seq + t) * token_bytes, token_bytes);
      }
}

// One shape: a token-order tensor of distinct bytes and its ranks' rows;
// both directions on the device against them.
static void layout_case(int64_t rows, int64_t seq, int cp, size_t token_bytes) {
  size_t n = (size_t)(rows * seq) * token_bytes;
  uint8_t *tokens = malloc(n), *ranks = malloc(n), *got = malloc(n);
  if (!tokens || !ranks || !got)
    exit(1);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = (uint8_t)(i * 7 + i / 251); // no short period: a misplaced token shows
  reference_ranks(tokens, rows, seq, cp, token_bytes, ranks);
  void *d_src, *d_dst;
  CUDA_OK(cudaMalloc(&d_src, n));
  CUDA_OK(cudaMalloc(&d_dst, n));
  CUDA_OK(cudaMemcpy(d_src, ranks, n, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_dst, 0xAB, n));
  CUDA_OK(srt_cuda_cp_to_tokens(d_dst, d_src, rows, seq, cp, token_bytes, 0));
  read_back(got, d_dst, n);
  check("to tokens", cp, token_bytes, got, tokens, n);
  CUDA_OK(cudaMemcpy(d_src, tokens, n, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_dst, 0xAB, n));
  CUDA_OK(srt_cuda_cp_to_ranks(d_dst, d_src, rows, seq, cp, token_bytes, 0));
  read_back(got, d_dst, n);
  check("to ranks", cp, token_bytes, got, ranks, n);
  CUDA_OK(cudaFree(d_src));
  CUDA_OK(cudaFree(d_dst));
  free(tokens);
  free(ranks);
  free(got);
}

int main(void) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    printf("SKIP: no CUDA device (%s)\n",
           err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  for (int cp = 2; cp <= 4; ++cp) {
    layout_case(3, 24, cp, 12); // bf16 K/V: 2 KV heads x head_dim 3
    layout_case(3, 24, cp, 8);  // int64 segment ids
  }
  layout_case(1, 4, 2, 12);
  printf("%s: %d check(s) failed\n", g_failures ? "FAILED" : "OK", g_failures);
  return g_failures ? 1 : 0;
}
