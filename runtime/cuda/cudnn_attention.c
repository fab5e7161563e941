// Fused attention through cuDNN's backend graph API, in C: the operation
// graphs cudnn-frontend builds for its sdpa and sdpa_backward nodes, written
// out node by node as backend descriptors, planned once per shape.
//
// Tensors are [b, h, s, d] views of our [batch, seq, heads * hd] buffers.
// The backend's matmul multiplies [.., m, k] by [.., k, n], so K (and, in the
// backward, V) enter as the transposed view [b, kv, d, s]; with fewer KV
// heads the matmuls broadcast each KV head over its h / kv query heads
// (query head i reads KV head i / (h / kv), Hugging Face's repeat_kv).
//
//   forward:  S = (Q Kt) scale, masked; max, sum = rowmax S, rowsum e^(S-max);
//             Stats = max + log sum (fp32 [b, h, s, 1]: our lse); O = (e / sum) V
//   backward: softmax_sum = rowsum(dO * O); P = exp(masked (Q Kt) scale - Stats);
//             dV = Pt dO; dS = P (dO Vt - softmax_sum) scale; dK = dSt Q;
//             dQ = dS K through an fp32 accumulator
//
// Masks are the frontend's diagonal bands: GEN_INDEX row and column indices,
// a comparison, and a BINARY_SELECT that writes -inf where it fails. The
// softmax and the masks are the frontend's composite forms (cuDNN 9.21 added
// single nodes for them; the composites remain accepted).
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_attention.h"

enum {
  kPlanCapacity = 32, // shapes per device: a step has a few per mask kind
  kGraphDescs = 192,  // descriptors of one graph (the backward makes about 110)
  kGraphOps = 64,
  kMaxConfigs = 16, // engine configs tried per heuristics mode
  kMaxUids = 20,
  kAlign = 16, // bytes; promised for every tensor and checked on every call
};

// Tensor uids. The fixed ones are the variant pack's (our buffers, the
// workspace tensors and the by-value scalars); virtual tensors count up
// from kUidVirtual.
enum {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidIoEnd, // the uids below are ours to fill, not the caller's
  kUidScale = kUidIoEnd,
  kUidNegInf,
  kUidOne,
  kUidLeftBound,
  kUidRightShift,
  kUidSoftmaxSum,
  kUidDQAccum,
  kUidVirtual = 100,
};

/// One shape's outcome: a finalised execution plan with everything it was
/// built from (kept alive as long as the plan, since the backend may refer to
/// them), or the verdict that cuDNN does not run this shape.
typedef struct cudnn_plan {
  srt_cuda_attention_shape shape;
  bool backward;
  bool supported;
  cudnnBackendDescriptor_t plan;
  cudnnBackendDescriptor_t *descs; // malloc'd; destroyed in reverse order
  int num_descs;
  int64_t uids[kMaxUids]; // every non-virtual tensor, in variant-pack order
  int num_uids;
  // The workspace: [dQ accumulator | softmax_sum | the engine's own] for the
  // backward, the engine's only for the forward.
  size_t dq_accum_offset, softmax_sum_offset, engine_offset, workspace_bytes;
  bool zero_dq_accum; // cuDNN before 9.6 expects the accumulator zeroed
  // Host values of the by-value scalars (the variant pack points here).
  float scale, neg_inf, one, left_bound;
  int32_t right_shift;
} cudnn_plan;

struct srt_cudnn_plan_cache {
  cudnn_plan plans[kPlanCapacity];
  int num_plans;
};

//===----------------------------------------------------------------------===//
// Graph building: every call records the first failure and then does
// nothing, so the builders below read as straight-line graph descriptions and
// are checked once at the end.
//===----------------------------------------------------------------------===//

static const char kTableFull[] = "cudnn_attention.c: graph descriptor table full";

typedef struct graph {
  cudnnBackendDescriptor_t descs[kGraphDescs]; // everything made, in order
  int num_descs;
  cudnnBackendDescriptor_t ops[kGraphOps];
  int num_ops;
  int64_t uids[kMaxUids]; // the non-virtual tensors
  int num_uids;
  int64_t next_uid; // for virtual tensors
  cudnnStatus_t status;
  const char *failed; // the call that failed first
  // Scalars shared by the nodes that use them (NULL when not in the graph).
  cudnnBackendDescriptor_t scale, neg_inf, one, left_bound, right_shift;
} graph;

static bool failed(const graph *g) {
  return g->status != CUDNN_STATUS_SUCCESS;
}

static void check(graph *g, cudnnStatus_t st, const char *call) {
  if (st != CUDNN_STATUS_SUCCESS && !failed(g)) {
    g->status = st;
    g->failed = call;
  }
}

// Keeps `desc` alive with the graph (and, on success, with the plan).
static void keep(graph *g, cudnnBackendDescriptor_t desc) {
  if (g->num_descs == kGraphDescs) {
    cudnnBackendDestroyDescriptor(desc);
    check(g, CUDNN_STATUS_INTERNAL_ERROR, kTableFull);
    return;
  }
  g->descs[g->num_descs++] = desc;
}

static cudnnBackendDescriptor_t create(graph *g, cudnnBackendDescriptorType_t type) {
  if (failed(g))
    return NULL;
  cudnnBackendDescriptor_t desc = NULL;
  check(g, cudnnBackendCreateDescriptor(type, &desc), "cudnnBackendCreateDescriptor");
  if (failed(g))
    return NULL;
  keep(g, desc);
  return failed(g) ? NULL : desc;
}

static void set(graph *g, cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count, const void *value,
                const char *what) {
  if (!failed(g))
    check(g, cudnnBackendSetAttribute(desc, name, type, count, value), what);
}

// The attribute's name is what a failure reports.
#define SET(g, desc, name, type, count, value) set(g, desc, name, type, count, value, #name)

static void finalize(graph *g, cudnnBackendDescriptor_t desc, const char *what) {
  if (!failed(g))
    check(g, cudnnBackendFinalize(desc), what);
}

static void destroy_all(cudnnBackendDescriptor_t *descs, int n) {
  // Reverse order: users (operations, plans) go before what they refer to.
  for (int i = n - 1; i >= 0; --i)
    cudnnBackendDestroyDescriptor(descs[i]);
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

typedef struct layout {
  int64_t dim[4], stride[4];
} layout;

// [batch, seq, heads * hd] as [b, h, s, d].
static layout interleaved(int64_t b, int64_t h, int64_t s, int64_t d) {
  return (layout){{b, h, s, d}, {s * h * d, d, h * d, 1}};
}

// A contiguous [b, h, m, n].
static layout dense(int64_t b, int64_t h, int64_t m, int64_t n) {
  return (layout){{b, h, m, n}, {h * m * n, m * n, n, 1}};
}

// The same memory with the last two dimensions swapped.
static layout transposed(layout l) {
  layout t = l;
  t.dim[2] = l.dim[3];
  t.dim[3] = l.dim[2];
  t.stride[2] = l.stride[3];
  t.stride[3] = l.stride[2];
  return t;
}

static layout q_layout(const srt_cuda_attention_shape *s) { // q, o, dO, dQ
  return interleaved(s->batch, s->heads, s->seq, s->head_dim);
}

static layout kv_layout(const srt_cuda_attention_shape *s) { // k, v, dK, dV
  return interleaved(s->batch, s->kv_heads, s->seq, s->head_dim);
}

static layout scores_layout(const srt_cuda_attention_shape *s) { // [b, h, s_q, s_kv]
  return dense(s->batch, s->heads, s->seq, s->seq);
}

static layout rows_layout(const srt_cuda_attention_shape *s) { // per query: lse
  return dense(s->batch, s->heads, s->seq, 1);
}

static cudnnBackendDescriptor_t make_tensor(graph *g, int64_t uid, layout l,
                                            cudnnDataType_t type, bool is_virtual) {
  cudnnBackendDescriptor_t t = create(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t align = kAlign;
  SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, l.dim);
  SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, l.stride);
  SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  if (is_virtual)
    SET(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  finalize(g, t, "cudnnBackendFinalize(tensor)");
  if (!is_virtual && !failed(g)) {
    if (g->num_uids == kMaxUids)
      check(g, CUDNN_STATUS_INTERNAL_ERROR, kTableFull);
    else
      g->uids[g->num_uids++] = uid;
  }
  return t;
}

// An intermediate the backend keeps on chip (no memory, no variant-pack entry).
static cudnnBackendDescriptor_t make_virtual(graph *g, layout l, cudnnDataType_t type) {
  return make_tensor(g, g->next_uid++, l, type, true);
}

// A scalar passed by value: the variant pack points at a host value. It
// has as many (unit) dimensions as the tensors it meets, which pointwise
// nodes require; they broadcast it.
static cudnnBackendDescriptor_t make_scalar(graph *g, int64_t uid, cudnnDataType_t type) {
  cudnnBackendDescriptor_t t = create(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t ones[4] = {1, 1, 1, 1}, align = kAlign;
  bool by_value = true;
  SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, ones);
  SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, ones);
  SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  SET(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
  finalize(g, t, "cudnnBackendFinalize(scalar tensor)");
  if (!failed(g)) {
    if (g->num_uids == kMaxUids)
      check(g, CUDNN_STATUS_INTERNAL_ERROR, kTableFull);
    else
      g->uids[g->num_uids++] = uid;
  }
  return t;
}

//===----------------------------------------------------------------------===//
// Operation nodes
//===----------------------------------------------------------------------===//

static void add_op(graph *g, cudnnBackendDescriptor_t op, const char *what) {
  finalize(g, op, what);
  if (failed(g))
    return;
  if (g->num_ops == kGraphOps)
    check(g, CUDNN_STATUS_INTERNAL_ERROR, kTableFull);
  else
    g->ops[g->num_ops++] = op;
}

// y = mode(x[, b][, t]) computed in `prec`; b and t may be NULL. `axis` is
// GEN_INDEX's (the dimension whose index it writes), ignored otherwise.
static void make_pointwise(graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                           int64_t axis, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                           cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t pw = create(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  SET(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  SET(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  if (mode == CUDNN_POINTWISE_GEN_INDEX)
    SET(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  finalize(g, pw, "cudnnBackendFinalize(pointwise)");
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  float alpha = 1.0f; // the frontend always sets both; 1 leaves the inputs unscaled
  SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
  SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  if (b)
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
  if (t)
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
  SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha);
  SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha);
  add_op(g, op, "cudnnBackendFinalize(pointwise operation)");
}

// mode(x[, b]) into a new virtual tensor.
static cudnnBackendDescriptor_t pointwise(graph *g, cudnnPointwiseMode_t mode,
                                          cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t b, layout l,
                                          cudnnDataType_t type) {
  cudnnBackendDescriptor_t y = make_virtual(g, l, type);
  make_pointwise(g, mode, prec, -1, x, b, NULL, y);
  return y;
}

// The index along `axis` (2: query row, 3: key column) of every element of
// x, int32. Computed in fp32 as the frontend's diagonal-band masks do.
static cudnnBackendDescriptor_t make_gen_index(graph *g, cudnnBackendDescriptor_t x, int64_t axis,
                                               layout l) {
  cudnnBackendDescriptor_t y = make_virtual(g, l, CUDNN_DATA_INT32);
  make_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, axis, x, NULL, NULL, y);
  return y;
}

// c = a b over the last two dimensions, batched (and broadcast) over the
// first two; fp32 accumulation.
static void make_matmul(graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                        cudnnBackendDescriptor_t c) {
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t mm = create(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  SET(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  finalize(g, mm, "cudnnBackendFinalize(matmul)");
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
  SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
  SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
  SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
  add_op(g, op, "cudnnBackendFinalize(matmul operation)");
}

// y = reduce(x) over the dimensions where y has extent 1 (or, for
// [b, h, ..] into [b, kv, ..], over each group of h / kv heads), in fp32.
static void make_reduction(graph *g, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                           cudnnBackendDescriptor_t y) {
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t red = create(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  SET(g, red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
  SET(g, red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  finalize(g, red, "cudnnBackendFinalize(reduction)");
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red);
  SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  add_op(g, op, "cudnnBackendFinalize(reduction operation)");
}

// y = x seen through y's dimensions and strides (a transpose here; no copy).
static void make_reshape(graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  add_op(g, op, "cudnnBackendFinalize(reshape operation)");
}

//===----------------------------------------------------------------------===//
// Attention pieces shared by both graphs
//===----------------------------------------------------------------------===//

// The scalars the shape needs, with their host values in `p`.
static void make_scalars(graph *g, const srt_cuda_attention_shape *s, cudnn_plan *p) {
  p->scale = s->scale;
  g->scale = make_scalar(g, kUidScale, CUDNN_DATA_FLOAT);
  if (!s->causal && s->sliding_window == 0)
    return;
  // cuDNN 9.10 and later want -inf for masked scores; earlier releases the
  // lowest finite float (cudnn-frontend, get_negative_inf_value).
  p->neg_inf = cudnnGetVersion() >= 91000 ? -INFINITY : -FLT_MAX;
  g->neg_inf = make_scalar(g, kUidNegInf, CUDNN_DATA_FLOAT);
  if (s->sliding_window > 0) {
    p->left_bound = (float)s->sliding_window;
    g->left_bound = make_scalar(g, kUidLeftBound, CUDNN_DATA_FLOAT);
    if (!s->causal && s->sliding_window > 1) {
      p->right_shift = (int32_t)(s->sliding_window - 1);
      g->right_shift = make_scalar(g, kUidRightShift, CUDNN_DATA_INT32);
    }
  }
}

// x where `keep`, else -inf.
static cudnnBackendDescriptor_t select_kept(graph *g, cudnnBackendDescriptor_t x,
                                            cudnnBackendDescriptor_t keep, layout l) {
  cudnnBackendDescriptor_t y = make_virtual(g, l, CUDNN_DATA_FLOAT);
  make_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, g->neg_inf, keep, y);
  return y;
}

// Keeps key j for query i when i + shift >= j: the causal diagonal (no
// shift) or a two-sided window's right edge (shift W - 1, so j - i < W).
static cudnnBackendDescriptor_t right_bound(graph *g, cudnnBackendDescriptor_t x, layout l) {
  cudnnBackendDescriptor_t row = make_gen_index(g, x, 2, l);
  cudnnBackendDescriptor_t col = make_gen_index(g, x, 3, l);
  if (g->right_shift)
    row = pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, row, g->right_shift, l,
                    CUDNN_DATA_INT32);
  cudnnBackendDescriptor_t keep =
      pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, l, CUDNN_DATA_BOOLEAN);
  return select_kept(g, x, keep, l);
}

// Keeps key j for query i when j + W > i, i.e. i - j < W: the window's left
// edge. The window is a float scalar, as in the frontend.
static cudnnBackendDescriptor_t left_bound(graph *g, cudnnBackendDescriptor_t x, layout l) {
  cudnnBackendDescriptor_t row = make_gen_index(g, x, 2, l);
  cudnnBackendDescriptor_t col = make_gen_index(g, x, 3, l);
  col = pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, col, g->left_bound, l,
                  CUDNN_DATA_FLOAT);
  cudnnBackendDescriptor_t keep =
      pointwise(g, CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, col, row, l, CUDNN_DATA_BOOLEAN);
  return select_kept(g, x, keep, l);
}

// Our masks: causal (j <= i), a window (|i - j| < W, or i - j < W when
// causal), or both. Every row keeps its diagonal, so no row is all -inf.
static cudnnBackendDescriptor_t masked(graph *g, const srt_cuda_attention_shape *s,
                                       cudnnBackendDescriptor_t x) {
  layout l = scores_layout(s);
  if (s->causal || s->sliding_window > 0)
    x = right_bound(g, x, l);
  if (s->sliding_window > 0)
    x = left_bound(g, x, l);
  return x;
}

// (Q Kt) * scale, fp32 [b, h, s, s].
static cudnnBackendDescriptor_t scaled_scores(graph *g, const srt_cuda_attention_shape *s,
                                              cudnnBackendDescriptor_t q,
                                              cudnnBackendDescriptor_t kt) {
  layout l = scores_layout(s);
  cudnnBackendDescriptor_t raw = make_virtual(g, l, CUDNN_DATA_FLOAT);
  make_matmul(g, q, kt, raw);
  return pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, raw, g->scale, l, CUDNN_DATA_FLOAT);
}

//===----------------------------------------------------------------------===//
// The forward graph
//===----------------------------------------------------------------------===//

// softmax(x) as bf16 (the type the second matmul takes), writing
// stats = max + log(sum exp(x - max)) (the frontend's composite softmax for
// cuDNN before 9.21, which has no single softmax node).
static cudnnBackendDescriptor_t softmax(graph *g, const srt_cuda_attention_shape *s,
                                        cudnnBackendDescriptor_t x,
                                        cudnnBackendDescriptor_t stats) {
  layout sl = scores_layout(s), rl = rows_layout(s);
  cudnnBackendDescriptor_t max = make_virtual(g, rl, CUDNN_DATA_FLOAT);
  make_reduction(g, CUDNN_REDUCE_TENSOR_MAX, x, max);
  cudnnBackendDescriptor_t shifted =
      pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, x, max, sl, CUDNN_DATA_FLOAT);
  cudnnBackendDescriptor_t e =
      pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, shifted, NULL, sl, CUDNN_DATA_FLOAT);
  cudnnBackendDescriptor_t sum = make_virtual(g, rl, CUDNN_DATA_FLOAT);
  make_reduction(g, CUDNN_REDUCE_TENSOR_ADD, e, sum);
  cudnnBackendDescriptor_t log_sum =
      pointwise(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, NULL, rl, CUDNN_DATA_FLOAT);
  make_pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, -1, max, log_sum, NULL, stats);
  cudnnBackendDescriptor_t p = make_virtual(g, sl, CUDNN_DATA_BFLOAT16);
  make_pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, -1, e, sum, NULL, p);
  return p;
}

static void build_forward(graph *g, const srt_cuda_attention_shape *s, cudnn_plan *p) {
  cudnnBackendDescriptor_t q = make_tensor(g, kUidQ, q_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t kt =
      make_tensor(g, kUidK, transposed(kv_layout(s)), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t v = make_tensor(g, kUidV, kv_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t o = make_tensor(g, kUidO, q_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t stats =
      make_tensor(g, kUidStats, rows_layout(s), CUDNN_DATA_FLOAT, false);
  make_scalars(g, s, p);
  cudnnBackendDescriptor_t x = masked(g, s, scaled_scores(g, s, q, kt));
  make_matmul(g, softmax(g, s, x, stats), v, o);
}

//===----------------------------------------------------------------------===//
// The backward graph
//===----------------------------------------------------------------------===//

// rowsum(dO * O) [b, h, s, 1] fp32 into the workspace: the backend wants it
// non-virtual (one kernel writes it, the next reads it). The product by 1 is
// the frontend's dropout-scale node, kept so the graph is the pattern cuDNN
// matches.
static cudnnBackendDescriptor_t softmax_sum(graph *g, const srt_cuda_attention_shape *s,
                                            cudnnBackendDescriptor_t dout,
                                            cudnnBackendDescriptor_t o) {
  layout rl = rows_layout(s);
  cudnnBackendDescriptor_t prod =
      pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dout, o, q_layout(s), CUDNN_DATA_FLOAT);
  cudnnBackendDescriptor_t sum = make_virtual(g, rl, CUDNN_DATA_FLOAT);
  make_reduction(g, CUDNN_REDUCE_TENSOR_ADD, prod, sum);
  cudnnBackendDescriptor_t out = make_tensor(g, kUidSoftmaxSum, rl, CUDNN_DATA_FLOAT, false);
  make_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, sum, g->one, NULL, out);
  return out;
}

// out [b, kv, s, d] = xt y for x [b, h, s, s] (P for dV, dS for dK), seen
// transposed as bf16; with fewer KV heads the product is formed per query
// head and summed over each KV head's group.
static void kv_gradient(graph *g, const srt_cuda_attention_shape *s, cudnnBackendDescriptor_t x,
                        cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t out) {
  cudnnBackendDescriptor_t xt = make_virtual(g, transposed(scores_layout(s)), CUDNN_DATA_BFLOAT16);
  make_reshape(g, x, xt);
  if (s->kv_heads == s->heads) {
    make_matmul(g, xt, y, out);
    return;
  }
  cudnnBackendDescriptor_t full = make_virtual(
      g, dense(s->batch, s->heads, s->seq, s->head_dim), CUDNN_DATA_BFLOAT16);
  make_matmul(g, xt, y, full);
  make_reduction(g, CUDNN_REDUCE_TENSOR_ADD, full, out);
}

// dQ = dS K, accumulated in fp32 in the workspace and then converted.
static void q_gradient(graph *g, const srt_cuda_attention_shape *s, cudnnBackendDescriptor_t ds,
                       cudnnBackendDescriptor_t kt, cudnnBackendDescriptor_t dq) {
  cudnnBackendDescriptor_t k = make_virtual(g, kv_layout(s), CUDNN_DATA_BFLOAT16);
  make_reshape(g, kt, k);
  cudnnBackendDescriptor_t acc = make_tensor(
      g, kUidDQAccum, dense(s->batch, s->heads, s->seq, s->head_dim), CUDNN_DATA_FLOAT, false);
  make_matmul(g, ds, k, acc);
  make_pointwise(g, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, -1, acc, NULL, NULL, dq);
}

static void build_backward(graph *g, const srt_cuda_attention_shape *s, cudnn_plan *p) {
  layout sl = scores_layout(s);
  cudnnBackendDescriptor_t q = make_tensor(g, kUidQ, q_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t kt =
      make_tensor(g, kUidK, transposed(kv_layout(s)), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t vt =
      make_tensor(g, kUidV, transposed(kv_layout(s)), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t o = make_tensor(g, kUidO, q_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t dout = make_tensor(g, kUidDO, q_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t stats =
      make_tensor(g, kUidStats, rows_layout(s), CUDNN_DATA_FLOAT, false);
  cudnnBackendDescriptor_t dq = make_tensor(g, kUidDQ, q_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t dk = make_tensor(g, kUidDK, kv_layout(s), CUDNN_DATA_BFLOAT16, false);
  cudnnBackendDescriptor_t dv = make_tensor(g, kUidDV, kv_layout(s), CUDNN_DATA_BFLOAT16, false);
  make_scalars(g, s, p);
  p->one = 1.0f;
  g->one = make_scalar(g, kUidOne, CUDNN_DATA_FLOAT);

  cudnnBackendDescriptor_t sum = softmax_sum(g, s, dout, o);
  // P = exp(S - Stats), recomputed from the forward's log-sum-exp.
  cudnnBackendDescriptor_t x = scaled_scores(g, s, q, kt);
  x = pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, x, stats, sl, CUDNN_DATA_FLOAT);
  x = masked(g, s, x);
  cudnnBackendDescriptor_t prob =
      pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, x, NULL, sl, CUDNN_DATA_FLOAT);
  kv_gradient(g, s, prob, dout, dv);
  // dS = P (dO Vt - softmax_sum) scale.
  cudnnBackendDescriptor_t dp = make_virtual(g, sl, CUDNN_DATA_FLOAT);
  make_matmul(g, dout, vt, dp);
  cudnnBackendDescriptor_t ds =
      pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, sum, sl, CUDNN_DATA_FLOAT);
  ds = pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, ds, prob, sl, CUDNN_DATA_FLOAT);
  ds = pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, ds, g->scale, sl, CUDNN_DATA_FLOAT);
  kv_gradient(g, s, ds, q, dk);
  q_gradient(g, s, ds, kt, dq);
}

//===----------------------------------------------------------------------===//
// Operation graph, heuristics, execution plan
//===----------------------------------------------------------------------===//

// The handle attributes are deprecated in cuDNN 9 and optional from 9.8.
// As cudnn-frontend does today, the graph gets the handle (heuristics take
// the device from it) and the plan gets it only before 9.8, where it is
// required. The enumerators are read once here, warnings silenced.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
static const cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

static cudnnBackendDescriptor_t make_operation_graph(graph *g, cudnnHandle_t handle) {
  cudnnBackendDescriptor_t og = create(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  SET(g, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->num_ops, g->ops);
  set(g, og, kGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle, "CUDNN_ATTR_OPERATIONGRAPH_HANDLE");
  // The graph-level verdict: NOT_SUPPORTED here means no engine matches.
  finalize(g, og, "cudnnBackendFinalize(operation graph)");
  return og;
}

// An execution plan for `cfg`, or NULL when cuDNN cannot finalise one.
static cudnnBackendDescriptor_t try_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t cfg) {
  cudnnBackendDescriptor_t plan = NULL;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) !=
      CUDNN_STATUS_SUCCESS)
    return NULL;
  bool needs_handle = cudnnGetVersion() < 90800;
  if ((!needs_handle || cudnnBackendSetAttribute(plan, kPlanHandle, CUDNN_TYPE_HANDLE, 1,
                                                 &handle) == CUDNN_STATUS_SUCCESS) &&
      cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) == CUDNN_STATUS_SUCCESS &&
      cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS)
    return plan;
  cudnnBackendDestroyDescriptor(plan);
  return NULL;
}

// The engine configs heuristics `mode` ranks for `og` (created into cfgs;
// *n receives how many), and the heuristics descriptor itself.
static cudnnBackendDescriptor_t heuristics(cudnnBackendDescriptor_t og,
                                           cudnnBackendHeurMode_t mode,
                                           cudnnBackendDescriptor_t cfgs[kMaxConfigs],
                                           int64_t *n) {
  *n = 0;
  cudnnBackendDescriptor_t heur = NULL;
  if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) !=
      CUDNN_STATUS_SUCCESS)
    return NULL;
  int64_t count = 0;
  if (cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                               &mode) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL) !=
          CUDNN_STATUS_SUCCESS) {
    cudnnBackendDestroyDescriptor(heur);
    return NULL;
  }
  // The results are copied into configs we create.
  int64_t made = 0;
  while (made < count && made < kMaxConfigs &&
         cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]) ==
             CUDNN_STATUS_SUCCESS)
    ++made;
  int64_t got = 0;
  if (made > 0 && cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &got,
                                           cfgs) == CUDNN_STATUS_SUCCESS)
    *n = got < made ? got : made;
  for (int64_t i = *n; i < made; ++i)
    cudnnBackendDestroyDescriptor(cfgs[i]);
  return heur;
}

// The first engine config, in heuristics mode A's order and then the
// fallback mode's, that finalises into an execution plan; NULL when none
// does (the shape is then unsupported). The chosen config and its
// heuristics stay with the graph; the rest are destroyed.
static cudnnBackendDescriptor_t choose_plan(graph *g, cudnnHandle_t handle,
                                            cudnnBackendDescriptor_t og) {
  static const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0] && !failed(g); ++m) {
    cudnnBackendDescriptor_t cfgs[kMaxConfigs];
    int64_t n;
    cudnnBackendDescriptor_t heur = heuristics(og, modes[m], cfgs, &n);
    if (!heur)
      continue;
    cudnnBackendDescriptor_t plan = NULL;
    int64_t chosen = -1;
    for (int64_t i = 0; i < n && !plan; ++i)
      if ((plan = try_plan(handle, cfgs[i])))
        chosen = i;
    for (int64_t i = 0; i < n; ++i)
      if (i != chosen)
        cudnnBackendDestroyDescriptor(cfgs[i]);
    if (!plan) {
      cudnnBackendDestroyDescriptor(heur);
      continue;
    }
    keep(g, heur);
    keep(g, cfgs[chosen]);
    keep(g, plan);
    return failed(g) ? NULL : plan; // keep() destroyed what did not fit
  }
  return NULL;
}

//===----------------------------------------------------------------------===//
// The plan cache
//===----------------------------------------------------------------------===//

static bool same_shape(const srt_cuda_attention_shape *a, const srt_cuda_attention_shape *b) {
  return a->batch == b->batch && a->seq == b->seq && a->heads == b->heads &&
         a->kv_heads == b->kv_heads && a->head_dim == b->head_dim &&
         a->q_head_offset == b->q_head_offset && a->global_heads == b->global_heads &&
         a->causal == b->causal && a->sliding_window == b->sliding_window &&
         a->scale == b->scale && a->softcap == b->softcap && a->cp_size == b->cp_size &&
         a->cp_rank == b->cp_rank;
}

static const char *pass_name(bool backward) {
  return backward ? "backward" : "forward";
}

// A refusal by cuDNN (the graph, an attribute value or a shape it does not
// take) rather than a failure of the library or the machine.
static bool is_rejection(cudnnStatus_t st) {
  int category = CUDNN_STATUS_CATEGORY(st);
  return category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM;
}

// With SHARD_CUDNN_DEBUG set, why a shape fell back to our kernels (cuDNN's
// own CUDNN_LOGLEVEL_DBG=2 logs the details).
static void note_unsupported(const cudnn_plan *p, const char *why, cudnnStatus_t st) {
  if (!getenv("SHARD_CUDNN_DEBUG"))
    return;
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  const srt_cuda_attention_shape *s = &p->shape;
  fprintf(stderr,
          "cudnn_attention: %s [batch %lld, seq %lld, heads %lld/%lld, hd %lld, causal %d, "
          "window %lld] unsupported: %s: %s%s%s\n",
          pass_name(p->backward), (long long)s->batch, (long long)s->seq, (long long)s->heads,
          (long long)s->kv_heads, (long long)s->head_dim, s->causal,
          (long long)s->sliding_window, why,
          st == CUDNN_STATUS_SUCCESS ? "no engine finalised" : cudnnGetErrorString(st),
          detail[0] ? ": " : "", detail);
}

static size_t round_up(size_t n) {
  return (n + 255) & ~(size_t)255;
}

// Lays out the workspace and takes the graph's descriptors into `p`.
static srt_status adopt(cudnn_plan *p, graph *g, cudnnBackendDescriptor_t plan) {
  int64_t engine = 0, count = 0;
  cudnnStatus_t st = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              CUDNN_TYPE_INT64, 1, &count, &engine);
  if (st != CUDNN_STATUS_SUCCESS || engine < 0)
    return SRT_ERROR(SRT_UNAVAILABLE,
                     "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) failed "
                     "for attention %s: %s",
                     pass_name(p->backward), cudnnGetErrorString(st));
  p->descs = malloc((size_t)g->num_descs * sizeof *p->descs);
  if (!p->descs)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "cudnn_attention: out of host memory for a plan");
  memcpy(p->descs, g->descs, (size_t)g->num_descs * sizeof *p->descs);
  p->num_descs = g->num_descs;
  memcpy(p->uids, g->uids, (size_t)g->num_uids * sizeof *p->uids);
  p->num_uids = g->num_uids;
  p->plan = plan;
  p->supported = true;
  const srt_cuda_attention_shape *s = &p->shape;
  if (p->backward) {
    size_t rows = (size_t)(s->batch * s->heads * s->seq);
    p->dq_accum_offset = 0;
    p->softmax_sum_offset = round_up(rows * (size_t)s->head_dim * sizeof(float));
    p->engine_offset = p->softmax_sum_offset + round_up(rows * sizeof(float));
    // Before 9.6 the frontend zeroed the accumulator itself (cudaMemset).
    p->zero_dq_accum = cudnnGetVersion() < 90600;
  }
  p->workspace_bytes = p->engine_offset + (size_t)engine;
  return NULL;
}

// Builds p's graph and plan. NULL with p->supported false when cuDNN
// rejects the shape; an error (p left empty) when cuDNN fails otherwise.
static srt_status build_plan(srt_cuda_device *d, cudnn_plan *p) {
  graph *g = calloc(1, sizeof *g);
  if (!g)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "cudnn_attention: out of host memory for a graph");
  g->next_uid = kUidVirtual;
  if (p->backward)
    build_backward(g, &p->shape, p);
  else
    build_forward(g, &p->shape, p);
  cudnnBackendDescriptor_t og = make_operation_graph(g, d->cudnn);
  cudnnBackendDescriptor_t plan = failed(g) ? NULL : choose_plan(g, d->cudnn, og);
  srt_status err = NULL;
  if (plan) {
    err = adopt(p, g, plan);
  } else if (!failed(g) || is_rejection(g->status)) {
    note_unsupported(p, g->failed ? g->failed : "heuristics", g->status);
  } else {
    char detail[512] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    err = SRT_ERROR(g->failed == kTableFull ? SRT_INTERNAL : SRT_UNAVAILABLE,
                    "%s failed building the cuDNN attention %s graph: %s%s%s", g->failed,
                    pass_name(p->backward), cudnnGetErrorString(g->status),
                    detail[0] ? ": " : "", detail);
  }
  if (!p->supported) { // rejected, or adopt() failed: nothing outlives the graph
    destroy_all(g->descs, g->num_descs);
    free(p->descs);
    p->descs = NULL;
    p->plan = NULL;
    p->num_descs = 0;
  }
  free(g);
  return err;
}

// What cuDNN's fused attention cannot express, decided without asking it.
static bool expressible(const srt_cuda_attention_shape *s, bool backward) {
  size_t version = cudnnGetVersion();
  if (s->softcap != 0.0f) // tanh capping is not in the graphs built here
    return false;
  if (s->cp_size > 1) // local queries against all keys: our kernel's masks
    return false;
  // cuDNN maps query head i to KV head i / (heads / kv_heads) only.
  if (s->q_head_offset != 0 || s->global_heads != s->heads || s->kv_heads <= 0 ||
      s->heads % s->kv_heads != 0)
    return false;
  // The fused kernels' head sizes: up to 256 on Hopper (Gemma-3's 256
  // included); where cuDNN lacks an engine for a size, finalising fails and
  // the shape is marked unsupported.
  if (s->head_dim > 256 || s->head_dim % 8 != 0)
    return false;
  // Releases cudnn-frontend refuses for bf16 attention (known bugs).
  if (version < 90000 || version == 91000 || version == 91001)
    return false;
  if (version == 91400 && s->sliding_window > 0 && !s->causal && s->seq > 1024)
    return false;
  if (backward && s->seq == 1) // s_q = s_kv = 1 is refused by the frontend
    return false;
  // Up to 9.15 the frontend adds a padding mask to backward graphs whose
  // key length is not a multiple of 128; we leave those to our kernel.
  if (backward && version <= 91500 && s->seq % 128 != 0)
    return false;
  return true;
}

// The cached plan for (s, backward), building it on first use. *out is
// NULL when the cache is full (the shape then runs on our kernels).
static srt_status find_plan(srt_cuda_device *d, const srt_cuda_attention_shape *s, bool backward,
                            cudnn_plan **out) {
  *out = NULL;
  struct srt_cudnn_plan_cache *cache = d->cudnn_plans;
  if (!cache) {
    cache = calloc(1, sizeof *cache);
    if (!cache)
      return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "cudnn_attention: out of host memory");
    d->cudnn_plans = cache;
  }
  for (int i = 0; i < cache->num_plans; ++i)
    if (cache->plans[i].backward == backward && same_shape(&cache->plans[i].shape, s)) {
      *out = &cache->plans[i];
      return NULL;
    }
  if (cache->num_plans == kPlanCapacity)
    return NULL;
  cudnn_plan *p = &cache->plans[cache->num_plans];
  memset(p, 0, sizeof *p);
  p->shape = *s;
  p->backward = backward;
  SRT_RETURN_IF_ERROR(build_plan(d, p)); // not cached: a later call tries again
  cache->num_plans++;
  *out = p;
  return NULL;
}

static bool aligned(const void *ptr) {
  return ((uintptr_t)ptr % kAlign) == 0;
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

// The address the variant pack gives `uid`: a caller's buffer, a place in
// the workspace, or a host scalar.
static void *address_of(cudnn_plan *p, int64_t uid, void *const io[kUidIoEnd], uint8_t *ws) {
  switch (uid) {
  case kUidScale:
    return &p->scale;
  case kUidNegInf:
    return &p->neg_inf;
  case kUidOne:
    return &p->one;
  case kUidLeftBound:
    return &p->left_bound;
  case kUidRightShift:
    return &p->right_shift;
  case kUidSoftmaxSum:
    return ws + p->softmax_sum_offset;
  case kUidDQAccum:
    return ws + p->dq_accum_offset;
  default:
    return io[uid];
  }
}

// Runs p's plan on d->compute (the handle's stream) over `io` (indexed by uid).
static srt_status execute(srt_cuda_device *d, cudnn_plan *p, void *const io[kUidIoEnd]) {
  // Not srt_cuda_scratch: the caller's check buffers (its own output and
  // lse on a shape's first run) may live there, and growing it would free
  // them.
  void *ws = NULL;
  if (p->workspace_bytes > 0)
    SRT_RETURN_IF_ERROR(srt_cuda_cudnn_workspace(d, p->workspace_bytes, &ws));
  if (p->zero_dq_accum)
    SRT_CUDA_CHECK(cudaMemsetAsync((uint8_t *)ws + p->dq_accum_offset, 0,
                                   p->softmax_sum_offset - p->dq_accum_offset, d->compute));
  void *ptrs[kMaxUids];
  for (int i = 0; i < p->num_uids; ++i)
    ptrs[i] = address_of(p, p->uids[i], io, ws);
  void *engine_ws = ws ? (uint8_t *)ws + p->engine_offset : NULL;
  cudnnBackendDescriptor_t pack = NULL;
  cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  const char *call = "cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)";
#define STEP(expr)                                                                          \
  do {                                                                                       \
    if (st == CUDNN_STATUS_SUCCESS) {                                                        \
      st = (expr);                                                                           \
      call = #expr;                                                                          \
    }                                                                                        \
  } while (0)
  STEP(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                p->num_uids, p->uids));
  STEP(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                p->num_uids, ptrs));
  STEP(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                &engine_ws));
  STEP(cudnnBackendFinalize(pack));
  STEP(cudnnBackendExecute(d->cudnn, p->plan, pack));
#undef STEP
  if (pack)
    cudnnBackendDestroyDescriptor(pack);
  if (st == CUDNN_STATUS_SUCCESS)
    return NULL;
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  const srt_cuda_attention_shape *s = &p->shape;
  return SRT_ERROR(SRT_UNAVAILABLE,
                   "%s failed for attention %s [batch %lld, seq %lld, heads %lld/%lld, hd %lld]: "
                   "%s%s%s",
                   call, pass_name(p->backward), (long long)s->batch, (long long)s->seq,
                   (long long)s->heads, (long long)s->kv_heads, (long long)s->head_dim,
                   cudnnGetErrorString(st), detail[0] ? ": " : "", detail);
}

// Shared by both passes: the checks, the plan, then the run.
static srt_status run(srt_cuda_device *d, const srt_cuda_attention_shape *s, bool backward,
                      void *const io[kUidIoEnd], bool *supported) {
  *supported = false;
  if (!d->cudnn || !expressible(s, backward))
    return NULL;
  // Every tensor was promised kAlign-byte aligned; a buffer that is not
  // (e.g. at an odd offset in scratch) runs on our kernel this time.
  for (int uid = kUidQ; uid < kUidIoEnd; ++uid)
    if (io[uid] && !aligned(io[uid]))
      return NULL;
  cudnn_plan *p;
  SRT_RETURN_IF_ERROR(find_plan(d, s, backward, &p));
  if (!p || !p->supported)
    return NULL;
  *supported = true;
  return execute(d, p, io);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

srt_status srt_cudnn_attention_forward(srt_cuda_device *d, const srt_cuda_attention_shape *s,
                                       const srt_bf16 *q, const srt_bf16 *k,
                                       const srt_bf16 *v, srt_bf16 *out, float *lse,
                                       bool *supported) {
  void *io[kUidIoEnd] = {0};
  io[kUidQ] = (void *)q;
  io[kUidK] = (void *)k;
  io[kUidV] = (void *)v;
  io[kUidO] = out;
  io[kUidStats] = lse;
  return run(d, s, false, io, supported);
}

srt_status srt_cudnn_attention_backward(srt_cuda_device *d, const srt_cuda_attention_shape *s,
                                        const srt_bf16 *q, const srt_bf16 *k,
                                        const srt_bf16 *v, const srt_bf16 *out,
                                        const srt_bf16 *dout, const float *lse, srt_bf16 *dq,
                                        srt_bf16 *dk, srt_bf16 *dv, bool *supported) {
  void *io[kUidIoEnd] = {0};
  io[kUidQ] = (void *)q;
  io[kUidK] = (void *)k;
  io[kUidV] = (void *)v;
  io[kUidO] = (void *)out;
  io[kUidDO] = (void *)dout;
  io[kUidStats] = (void *)lse;
  io[kUidDQ] = dq;
  io[kUidDK] = dk;
  io[kUidDV] = dv;
  return run(d, s, true, io, supported);
}

void srt_cudnn_attention_release(srt_cuda_device *d) {
  struct srt_cudnn_plan_cache *cache = d->cudnn_plans;
  if (!cache)
    return;
  for (int i = 0; i < cache->num_plans; ++i) {
    cudnn_plan *p = &cache->plans[i];
    // The plan is among descs (kept last), so one reverse sweep frees all.
    destroy_all(p->descs, p->num_descs);
    free(p->descs);
  }
  free(cache);
  d->cudnn_plans = NULL;
}
