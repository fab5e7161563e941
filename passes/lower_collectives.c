// Collectives in lower-to-runtime: the non-blocking form of a collective
// an nn.wait completes, the in-flight slots they take (at most
// SRT_MAX_PENDING, the oldest completed early when all are taken), and the
// buckets of overlap-collectives (nn.bucket: one start and one wait for
// several collectives, with the runtime's staging per slot).
#include <stdio.h>
#include <string.h>

#include "lower_run.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "shard_ops.h"

// The non-blocking form of collective `op` when its result's one reader is
// an nn.wait (overlap-collectives made it so), else NULL.
const lowering *lr_start_form(lower_run *r, MlirOperation op) {
  if (mlirOperationGetNumResults(op) != 1)
    return NULL;
  MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, 0));
  if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u)) ||
      nn_op_kind_of(mlirOpOperandGetOwner(u)) != NN_OP_WAIT)
    return NULL;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  char fn[64];
  const lowering *l = NULL;
  if (name.length > 6 && !memcmp(name.data, "shard.", 6) &&
      snprintf(fn, sizeof fn, "srt_op_%.*s_start", (int)name.length - 6, name.data + 6) <
          (int)sizeof fn)
    l = lr_lowering_named(fn);
  if (!l)
    lr_fail(r,
            "nn.wait of '%.*s', which has no non-blocking form (all_reduce, all_gather and "
            "reduce_scatter have)",
            (int)name.length, name.data);
  return l;
}

// Completes the collective in flight longest, here (before `at`), so that
// its slot can be taken again: completing early is always safe (its
// buffers are live from its start to its nn.wait), and its nn.wait then
// lowers to nothing. Returns the slot.
static int lr_complete_oldest(lower_run *r, MlirOperation at) {
  int oldest = 0;
  for (int i = 1; i < SRT_MAX_PENDING; ++i)
    if (r->taken[i] < r->taken[oldest])
      oldest = i;
  MlirOperation c = mlirOpResultGetOwner(r->in_flight[oldest]);
  bool bucket = lr_bucket_id(c) >= 0;
  r->slot = oldest;
  lr_lower_op(r, lr_lowering_named(bucket ? "srt_op_bucket_wait" : "srt_op_collective_wait"),
              bucket ? c : at, (MlirOperation){NULL});
  tp_ptr_map_put(&r->early, r->in_flight[oldest].ptr, 1);
  r->in_flight[oldest] = (MlirValue){NULL};
  return oldest;
}

// Takes an in-flight slot for the result of `op` into r->slot: a free one,
// else the oldest's once complete_oldest has completed it.
bool lr_take_slot(lower_run *r, MlirOperation op) {
  int slot = -1;
  for (int i = 0; i < SRT_MAX_PENDING && slot < 0; ++i)
    if (mlirValueIsNull(r->in_flight[i]))
      slot = i;
  if (slot < 0)
    slot = lr_complete_oldest(r, op);
  r->in_flight[slot] = mlirOperationGetResult(op, 0);
  r->taken[slot] = r->num_taken++;
  r->slot = slot;
  return !r->errors;
}

// Frees the slot of the collective nn.wait `op` waits for into r->slot:
// 1, or 0 when complete_oldest completed it already (no call), or -1 (an
// error) when no collective before it started it.
int lr_free_slot(lower_run *r, MlirOperation op) {
  MlirValue v = mlirOperationGetOperand(op, 0);
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    if (r->in_flight[i].ptr == v.ptr) {
      r->in_flight[i] = (MlirValue){NULL};
      r->slot = i;
      return 1;
    }
  intptr_t done;
  if (tp_ptr_map_get(&r->early, v.ptr, &done))
    return 0;
  lr_fail(r, "nn.wait of a value no non-blocking collective before it defines (a collective "
             "is started non-blocking only when its one reader is a single nn.wait)");
  return -1;
}

//===----------------------------------------------------------------------===//
// Buckets (overlap-collectives' nn.bucket)
//===----------------------------------------------------------------------===//

enum { kMaxBucket = SRT_MAX_BUCKET };

int64_t lr_bucket_id(MlirOperation op) { return nn_attr_int(op, "nn.bucket", -1); }

// The op defining operand 0 of nn.wait `op` (a collective), or null.
static MlirOperation lr_waited_collective(MlirOperation op) {
  MlirValue v = mlirOperationGetOperand(op, 0);
  return mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
}

// The collective an op stands for: an nn.wait's operand's definition, or
// the op itself.
MlirOperation lr_collective_of(MlirOperation op) {
  if (nn_op_kind_of(op) == NN_OP_WAIT) {
    MlirOperation c = lr_waited_collective(op);
    return mlirOperationIsNull(c) ? op : c;
  }
  return op;
}

// The members of the bucket of collective `op`, in block order (at most
// kMaxBucket; more fail).
static int bucket_members(lower_run *r, MlirOperation op, MlirOperation m[kMaxBucket]) {
  int64_t id = lr_bucket_id(op);
  int n = 0;
  for (MlirOperation o = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(o);
       o = mlirOperationGetNextInBlock(o))
    if (nn_op_kind_of(o) == NN_OP_NONE && lr_bucket_id(o) == id) {
      if (n == kMaxBucket) {
        lr_fail(r, "bucket %lld has more than %d members", (long long)id, kMaxBucket);
        return 0;
      }
      m[n++] = o;
    }
  return n;
}

// The srt_bucket_kind of a bucket's collectives.
int64_t lr_bucket_kind(MlirOperation op) {
  op = lr_collective_of(op);
  return tp_op_is(op, "shard.all_gather")       ? SRT_BUCKET_ALL_GATHER
         : tp_op_is(op, "shard.reduce_scatter") ? SRT_BUCKET_REDUCE_SCATTER
                                                : SRT_BUCKET_ALL_REDUCE;
}

// A bucket member's element count: the smaller of its sides.
static int64_t member_count(MlirOperation m) {
  int64_t in = lr_numel(mlirOperationGetOperand(m, 0)),
          out = lr_numel(mlirOperationGetResult(m, 0));
  return in < out ? in : out;
}

// The bucket of c->op as a private constant [n, (in, out, count) x n]; its
// address is the argument. Every member must be the first one's kind, axis
// and dtype, with its sides in the group size's ratio.
void lr_arg_bucket(lower_call *c) {
  lower_run *r = c->r;
  MlirOperation m[kMaxBucket];
  int n = bucket_members(r, lr_collective_of(c->op), m);
  int64_t values[1 + 3 * kMaxBucket] = {n}, bytes = 0, axis = -1, dtype = -1;
  for (int j = 0; j < n; ++j) {
    lower_call mc = {.r = r, .op = m[j]};
    int64_t ax = lr_grid_axis(&mc), dt = lr_op_dtype(&mc, mlirOperationGetOperand(m[j], 0));
    int64_t in = lr_numel(mlirOperationGetOperand(m[j], 0)),
            out = lr_numel(mlirOperationGetResult(m[j], 0));
    int64_t parts = r->mesh.size[ax < 0 || ax > 1 ? 0 : ax];
    bool sides = lr_bucket_kind(m[j]) == SRT_BUCKET_ALL_GATHER       ? out == in * parts
                 : lr_bucket_kind(m[j]) == SRT_BUCKET_REDUCE_SCATTER ? in == out * parts
                                                                     : in == out;
    if ((j && (ax != axis || dt != dtype || lr_bucket_kind(m[j]) != lr_bucket_kind(m[0]))) ||
        !sides) {
      r->current = m[j];
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(m[0]));
      lr_fail(r, "bucket %lld: member %d is not a %.*s of the first member's axis and dtype",
              (long long)lr_bucket_id(m[0]), j, (int)name.length, name.data);
      return;
    }
    axis = ax;
    dtype = dt;
    values[1 + 3 * j] = lr_find_value(r, mlirOperationGetOperand(m[j], 0));
    values[2 + 3 * j] = lr_find_value(r, mlirOperationGetResult(m[j], 0));
    values[3 + 3 * j] = member_count(m[j]);
    bytes += (in + out) * (dtype == TP_BUF_BF16 ? 2 : 4);
  }
  if (r->cuda) // srt_cuda_stage grows by a quarter and 256 bytes over the request
    bytes += bytes / 4 + 256;
  if (r->stage_bytes[r->slot] < bytes)
    r->stage_bytes[r->slot] = bytes;
  char name[48];
  snprintf(name, sizeof name, "bucket_%d", r->num_buckets++);
  MlirType type = mlirLLVMArrayTypeGet(r->top.i64, (unsigned)(1 + 3 * n));
  MlirBlock init;
  lb_builder b = r->top;
  b.loc = mlirOperationGetLocation(m[0]);
  lb_global(&b, name, type, false, &init);
  b.block = init;
  MlirValue agg = lb_zero(&b, type);
  for (int64_t i = 0; i < 1 + 3 * n; ++i)
    agg = lb_insert(&b, agg, lb_const_int(&b, b.i64, values[i]), 1, &i);
  lb_return(&b, agg);
  lr_push(c, lb_address_of(&r->at, name));
}

// Lowers bucket member `op` (a collective or its nn.wait): its first
// collective starts the bucket, its first wait completes it; the other
// members lower to nothing. False on failure.
bool lr_lower_bucket_op(lower_run *r, MlirOperation op) {
  MlirOperation m[kMaxBucket];
  int n = bucket_members(r, lr_collective_of(op), m);
  if (!n)
    return false;
  MlirValue first = mlirOperationGetResult(m[0], 0);
  if (nn_op_kind_of(op) != NN_OP_WAIT) {
    if (op.ptr != m[0].ptr)
      return true;
    if (!lr_take_slot(r, op))
      return false;
    lr_lower_op(r, lr_lowering_named("srt_op_bucket_start"), op, (MlirOperation){NULL});
    return !r->errors;
  }
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    if (r->in_flight[i].ptr == first.ptr) {
      r->in_flight[i] = (MlirValue){NULL};
      r->slot = i;
      lr_lower_op(r, lr_lowering_named("srt_op_bucket_wait"), op, (MlirOperation){NULL});
      return !r->errors;
    }
  return true; // a later member's wait: the first one unpacked it
}
