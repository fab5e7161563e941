// The state lower-to-runtime shares between its files: the run (the plan,
// the builders, the slots of collectives in flight), one call being
// packed, and the lowering of each runtime op. Private to
// lower_to_runtime.c and lower_collectives.c.
#ifndef SHARD_PASSES_LOWER_RUN_H
#define SHARD_PASSES_LOWER_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "buffer_plan.h"
#include "llvm_builder.h"
#include "ptr_map.h"
#include "sharding_rules.h"
#include "shardrt/types.h" // SRT_MAX_PENDING

enum { kMaxArgs = 40 };

typedef struct lower_run {
  MlirContext ctx;
  MlirOperation func, current;
  MlirBlock body;
  tp_mesh mesh;
  bool cuda;
  // What the calls read: every value's buffer, the parameter table and
  // the regions (buffer_plan.h), and the policy it was planned for.
  tp_buffer_policy policy;
  tp_buffer_plan plan;
  // What is built: module-level ops (declarations, globals, the step) go to
  // `top`; the step's calls to `at`, whose block changes after each check.
  lb_builder top, at;
  MlirRegion step_region;
  MlirBlock fail_block;
  MlirValue exec, options, result;
  bool *declared; // per lowering: its function is declared
  int num_attention;
  // Non-blocking collectives in flight while the calls are emitted: each
  // slot's collective result (null: free), and the slot of the call being
  // packed (START_SLOT / WAIT_SLOT).
  MlirValue in_flight[SRT_MAX_PENDING];
  int64_t taken[SRT_MAX_PENDING], num_taken; // the order slots were taken in
  tp_ptr_map early;                          // collective results completed before their nn.wait
  int64_t slot;
  // The staging bytes the runtime keeps per slot for buckets (the largest
  // bucket that slot carried), and the buckets' tables emitted.
  int64_t stage_bytes[SRT_MAX_PENDING];
  int num_buckets;
  int errors;
} lower_run;

// One call being packed: the op it lowers (and the second op of a fusion),
// and its arguments so far (the exec first).
typedef struct lower_call {
  lower_run *r;
  MlirOperation op, fused;
  int n;
  MlirValue args[kMaxArgs];
} lower_call;

// One lowering per runtime op: its function, the op it lowers, its packing.
typedef struct lowering {
  const char *fn, *source;
  void (*pack)(lower_call *c);
} lowering;

/// Reports an error at r->current (tp_verror, "lower-to-runtime") and counts it.
__attribute__((format(printf, 2, 3))) void lr_fail(lower_run *r, const char *fmt, ...);

/// Emits the call of `l` for `op` (and `fused`, the second op of a fusion):
/// its arguments, the call, and a check that returns a failure at once.
void lr_lower_op(lower_run *r, const lowering *l, MlirOperation op, MlirOperation fused);

/// The lowering calling runtime function `fn`, or NULL.
const lowering *lr_lowering_named(const char *fn);

/// The arena offset of `v`'s buffer (0 after an error if it has none).
int64_t lr_find_value(lower_run *r, MlirValue v);

/// A collective's one mesh axis (0 after an error otherwise).
int64_t lr_grid_axis(lower_call *c);

/// The dtype argument of an op on `v`: fp32 or bf16 (an error for int64).
int64_t lr_op_dtype(lower_call *c, MlirValue v);

/// Appends argument `v` to the call.
void lr_push(lower_call *c, MlirValue v);

/// The element count of `v`'s tensor type.
int64_t lr_numel(MlirValue v);

/// The non-blocking form of collective `op` when its result's one reader
/// is an nn.wait, else NULL (an error when there is none).
const lowering *lr_start_form(lower_run *r, MlirOperation op);

/// Takes an in-flight slot for `op`'s result into r->slot; false on error.
bool lr_take_slot(lower_run *r, MlirOperation op);

/// Frees the slot nn.wait `op` waits for into r->slot: 1, 0 when it was
/// completed early (no call), -1 on error.
int lr_free_slot(lower_run *r, MlirOperation op);

/// The nn.bucket of `op`, or -1.
int64_t lr_bucket_id(MlirOperation op);

/// The collective an op stands for: an nn.wait's collective, or the op.
MlirOperation lr_collective_of(MlirOperation op);

/// The srt_bucket_kind of a bucket's collectives.
int64_t lr_bucket_kind(MlirOperation op);

/// Pushes the address of c->op's bucket table (a private constant global).
void lr_arg_bucket(lower_call *c);

/// Lowers bucket member `op` (a collective or its nn.wait); false on error.
bool lr_lower_bucket_op(lower_run *r, MlirOperation op);

#endif // SHARD_PASSES_LOWER_RUN_H
