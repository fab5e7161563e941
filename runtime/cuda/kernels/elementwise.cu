// Conversions, residual adds, bias add and its column-sum gradient, and the
// MLP activations (GLU with silu/gelu-tanh, relu2) of the CUDA backend, in
// the CPU kernels' fp32 formulas (runtime/cpu/{add,bias_add,glu,relu2}.c).
#include "../kernels.h"
#include "common.cuh"

using namespace srt_cuda;

namespace {

// Each thread takes chunks of kVec consecutive elements, grid-stride: one
// 16-byte access per chunk when every pointer is aligned (`vec`), scalar
// accesses for the tail chunk and for unaligned views.
template <class F>
__global__ void __launch_bounds__(kThreads) chunk_kernel(F f, int64_t n, bool vec) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c * kVec < n; c += stride) {
    int64_t i = c * kVec;
    int count = n - i < kVec ? (int)(n - i) : kVec;
    f(i, count, vec && count == kVec);
  }
}

template <class F> cudaError_t launch_chunks(const F &f, int64_t n, bool vec, cudaStream_t stream) {
  if (n <= 0)
    return cudaSuccess;
  chunk_kernel<<<grid_for((n + kVec - 1) / kVec, kThreads), kThreads, 0, stream>>>(f, n, vec);
  return cudaGetLastError();
}

// y = op(x) elementwise; TY/TX are bf16 or float.
template <class Op, class TY, class TX> struct Unary {
  TY *y;
  const TX *x;
  Op op;
  __device__ void operator()(int64_t i, int count, bool vec) const {
    float v[kVec];
    load_vec(v, x + i, count, vec);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] = op(v[k]);
    store_vec(y + i, v, count, vec);
  }
};

// y = op(a, b) elementwise. Both inputs are read before y is written, so
// y may alias a or b.
template <class Op, class T> struct Binary {
  T *y;
  const T *a, *b;
  Op op;
  __device__ void operator()(int64_t i, int count, bool vec) const {
    float va[kVec], vb[kVec];
    load_vec(va, a + i, count, vec);
    load_vec(vb, b + i, count, vec);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      va[k] = op(va[k], vb[k]);
    store_vec(y + i, va, count, vec);
  }
};

struct Identity {
  __device__ float operator()(float x) const { return x; }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// max(x, 0) as (x + |x|) / 2: keeps NaN like runtime/cpu/relu2.c (fmaxf
// would turn NaN into 0).
__device__ __forceinline__ float relu(float x) { return 0.5f * (x + fabsf(x)); }

struct Relu2 {
  __device__ float operator()(float x) const {
    float r = relu(x);
    return r * r;
  }
};
struct Relu2Grad { // op(dy, x)
  __device__ float operator()(float dy, float x) const { return 2.0f * relu(x) * dy; }
};

// The GLU activation and its derivative, as runtime/cpu/glu.c: gelu-tanh is
// g sigmoid(2u), u = k (g + a g^3), which equals 0.5 g (1 + tanh(u)).
constexpr float kGeluK = 0.7978845608028654f;
constexpr float kGeluA = 0.044715f;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ void activation(float g, int gelu, float *a, float *da) {
  if (!gelu) {
    float s = sigmoid(g);
    *a = g * s;
    *da = s * (1.0f + g * (1.0f - s));
    return;
  }
  float s = sigmoid(2.0f * kGeluK * (g + kGeluA * g * g * g));
  *a = g * s;
  *da = s + *a * (1.0f - s) * 2.0f * kGeluK * (1.0f + 3.0f * kGeluA * g * g);
}

struct Glu { // op(gate, up)
  int gelu;
  __device__ float operator()(float g, float u) const {
    float a, da;
    activation(g, gelu, &a, &da);
    return a * u;
  }
};

struct GluBackward {
  bf16 *dgate, *dup;
  const bf16 *dy, *gate, *up;
  int gelu;
  // Every input chunk is in registers before either output is written (they
  // may alias dy); a NULL output is skipped, as in srt_cpu_glu_backward.
  __device__ void operator()(int64_t i, int count, bool vec) const {
    float g[kVec], u[kVec], d[kVec], dg[kVec], du[kVec];
    load_vec(g, gate + i, count, vec);
    load_vec(u, up + i, count, vec);
    load_vec(d, dy + i, count, vec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float a, da;
      activation(g[k], gelu, &a, &da);
      dg[k] = d[k] * u[k] * da;
      du[k] = d[k] * a;
    }
    if (dgate)
      store_vec(dgate + i, dg, count, vec);
    if (dup)
      store_vec(dup + i, du, count, vec);
  }
};

struct BiasAdd {
  bf16 *y;
  const bf16 *x, *bias;
  int64_t features;
  // Vector loads of x; the bias index wraps instead of a 64-bit modulo per
  // element.
  __device__ void operator()(int64_t i, int count, bool vec) const {
    float v[kVec];
    load_vec(v, x + i, count, vec);
    int64_t f = i % features;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      v[k] += to_f32(bias[f]);
      f = f + 1 == features ? 0 : f + 1;
    }
    store_vec(y + i, v, count, vec);
  }
};

// Column sums in two deterministic passes: block (x, c) owns 32 columns
// and the c-th chunk of kChunkRows-row spans (chunk c takes spans c,
// c + chunks, ...); thread (x, y) sums column x over its rows, then a fixed
// tree over y writes partial[c, column]; the second pass adds the chunks
// in order. The chunks keep narrow biases (k/v_proj: 4 column blocks) from
// leaving most SMs idle.
constexpr int kColRows = 16;
constexpr int64_t kChunkRows = 256, kMaxChunks = 64;

int64_t chunks_for(int64_t n) {
  int64_t c = (n + kChunkRows - 1) / kChunkRows;
  return c < kMaxChunks ? c : kMaxChunks;
}

__global__ void __launch_bounds__(32 * kColRows)
    column_sum_kernel(float *partial, const bf16 *dy, int64_t n, int64_t features) {
  __shared__ float part[kColRows][33];
  int64_t f = (int64_t)blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  int64_t chunks = gridDim.y;
  if (f < features)
    for (int64_t s = blockIdx.y; s * kChunkRows < n; s += chunks)
      for (int64_t t = s * kChunkRows + threadIdx.y; t < n && t < (s + 1) * kChunkRows;
           t += kColRows)
        acc += to_f32(dy[t * features + f]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  for (int h = kColRows / 2; h > 0; h >>= 1) {
    if ((int)threadIdx.y < h)
      part[threadIdx.y][threadIdx.x] += part[threadIdx.y + h][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && f < features)
    partial[blockIdx.y * features + f] = part[0][threadIdx.x];
}

__global__ void column_sum_chunks_kernel(float *db, const float *partial, int64_t chunks,
                                         int64_t features) {
  for (int64_t f = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; f < features;
       f += (int64_t)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int64_t c = 0; c < chunks; ++c)
      s += partial[c * features + f];
    db[f] = s;
  }
}

bool all_aligned(const void *a, const void *b, const void *c = nullptr, const void *d = nullptr,
                 const void *e = nullptr) {
  return aligned16(a) && aligned16(b) && (!c || aligned16(c)) && (!d || aligned16(d)) &&
         (!e || aligned16(e));
}

} // namespace

cudaError_t srt_cuda_cast_f32_to_bf16(srt_bf16 *y, const float *x, int64_t n,
                                      cudaStream_t stream) {
  Unary<Identity, bf16, float> f{as_bf16(y), x, {}};
  return launch_chunks(f, n, all_aligned(y, x), stream);
}

cudaError_t srt_cuda_cast_bf16_to_f32(float *y, const srt_bf16 *x, int64_t n,
                                      cudaStream_t stream) {
  Unary<Identity, float, bf16> f{y, as_bf16(x), {}};
  return launch_chunks(f, n, all_aligned(y, x), stream);
}

cudaError_t srt_cuda_add_bf16(srt_bf16 *y, const srt_bf16 *a, const srt_bf16 *b, int64_t n,
                              cudaStream_t stream) {
  Binary<Add, bf16> f{as_bf16(y), as_bf16(a), as_bf16(b), {}};
  return launch_chunks(f, n, all_aligned(y, a, b), stream);
}

cudaError_t srt_cuda_add_f32(float *y, const float *a, const float *b, int64_t n,
                             cudaStream_t stream) {
  Binary<Add, float> f{y, a, b, {}};
  return launch_chunks(f, n, all_aligned(y, a, b), stream);
}

cudaError_t srt_cuda_bias_add(srt_bf16 *y, const srt_bf16 *x, const srt_bf16 *bias,
                              int64_t n, int64_t features, cudaStream_t stream) {
  if (features <= 0)
    return cudaSuccess;
  BiasAdd f{as_bf16(y), as_bf16(x), as_bf16(bias), features};
  return launch_chunks(f, n * features, all_aligned(y, x), stream);
}

int64_t srt_cuda_column_sum_scratch(int64_t n, int64_t features) {
  return n > 0 && features > 0 ? chunks_for(n) * features : 0;
}

/// With n == 0 the sums are empty: db is zeroed (a memset, no kernel).
cudaError_t srt_cuda_column_sum(float *db, const srt_bf16 *dy, int64_t n, int64_t features,
                                float *scratch, cudaStream_t stream) {
  if (features <= 0)
    return cudaSuccess;
  if (n <= 0)
    return cudaMemsetAsync(db, 0, (size_t)features * sizeof(float), stream);
  int64_t chunks = chunks_for(n);
  dim3 block(32, kColRows), grid((unsigned)((features + 31) / 32), (unsigned)chunks);
  column_sum_kernel<<<grid, block, 0, stream>>>(scratch, as_bf16(dy), n, features);
  column_sum_chunks_kernel<<<grid_for(features, kThreads), kThreads, 0, stream>>>(
      db, scratch, chunks, features);
  return cudaGetLastError();
}

cudaError_t srt_cuda_glu_forward(srt_bf16 *y, const srt_bf16 *gate, const srt_bf16 *up,
                                 int64_t n, int activation, cudaStream_t stream) {
  Binary<Glu, bf16> f{as_bf16(y), as_bf16(gate), as_bf16(up), {activation != 0}};
  return launch_chunks(f, n, all_aligned(y, gate, up), stream);
}

cudaError_t srt_cuda_glu_backward(srt_bf16 *dgate, srt_bf16 *dup, const srt_bf16 *dy,
                                  const srt_bf16 *gate, const srt_bf16 *up, int64_t n,
                                  int activation, cudaStream_t stream) {
  GluBackward f{as_bf16(dgate), as_bf16(dup), as_bf16(dy), as_bf16(gate), as_bf16(up),
                activation != 0};
  return launch_chunks(f, n, all_aligned(dgate, dup, dy, gate, up), stream);
}

cudaError_t srt_cuda_relu2_forward(srt_bf16 *y, const srt_bf16 *x, int64_t n,
                                   cudaStream_t stream) {
  Unary<Relu2, bf16, bf16> f{as_bf16(y), as_bf16(x), {}};
  return launch_chunks(f, n, all_aligned(y, x), stream);
}

cudaError_t srt_cuda_relu2_backward(srt_bf16 *dx, const srt_bf16 *dy, const srt_bf16 *x,
                                    int64_t n, cudaStream_t stream) {
  Binary<Relu2Grad, bf16> f{as_bf16(dx), as_bf16(dy), as_bf16(x), {}};
  return launch_chunks(f, n, all_aligned(dx, dy, x), stream);
}
