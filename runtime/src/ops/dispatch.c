// srt_op_X (shardrt/ops.h), generated from the op table (shardrt/ops.def):
// the checks every backend shares (each argument by its kind, then the
// op's own check), then the entry point of the exec's backend; an error of
// either gets this rank's context here (srt_status_annotate).
#include <time.h>

#include "shardrt/backend.h"
#include "shardrt/collectives.h"
#include "shardrt/context.h"
#include "shardrt/profile.h"

// The checks of one argument tuple (kind, name, src), walked as op_table.h
// describes.
#define CHECKS(args) CHECKS_A args(END, _, _)
#define CHECKS_A(kind, name, src) CHECK_##kind(name) SRT_OP_NEXT_##kind(CHECKS_B)
#define CHECKS_B(kind, name, src) CHECK_##kind(name) SRT_OP_NEXT_##kind(CHECKS_A)
#define CHECK_BUF(name) SRT_RETURN_IF_ERROR(srt_check_offset(e, op, #name, name, 0));
#define CHECK_OPT_BUF(name) SRT_RETURN_IF_ERROR(srt_check_offset(e, op, #name, name, 1));
#define CHECK_SIZE(name) SRT_RETURN_IF_ERROR(srt_check_size(e, op, #name, name));
#define CHECK_INT(name)
#define CHECK_AXIS(name) SRT_RETURN_IF_ERROR(srt_check_axis(e, op, #name, name));
#define CHECK_DTYPE(name) SRT_RETURN_IF_ERROR(srt_check_dtype(e, op, #name, name));
#define CHECK_F64(name)
#define CHECK_PTR(name) SRT_RETURN_IF_ERROR(srt_check_ptr(e, op, #name, name));
#define CHECK_ATTENTION(name) CHECK_PTR(name)
#define CHECK_BUCKET(name) CHECK_PTR(name)
#define CHECK_PROGRAM(name) CHECK_PTR(name)
#define CHECK_OPTIONS(name) CHECK_PTR(name)
#define CHECK_RESULT(name) CHECK_PTR(name)
#define CHECK_REQUIRE(name)
#define CHECK_END(name)

// The exec's op table (srt_check_exec: a backend is set).
static const srt_ops *ops_of(const srt_exec *e) { return e->backend->ops; }

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Adds the seconds since t0 to the kind of op `name` in `profile`.
static void profile_add(srt_profile *profile, const char *name, double t0) {
  srt_op_kind kind = srt_op_kind_of(name);
  profile->seconds[kind] += now_seconds() - t0;
  profile->calls[kind]++;
}

// The rank context every op error carries, added here once for the checks
// and the backends alike (none of them formats the rank itself); none
// without a context (srt_check_exec's error).
static srt_status at_rank(const srt_exec *e, srt_status s) {
  int rank = srt_op_rank(e);
  return s && rank >= 0 ? srt_status_annotate(s, rank, "rank %d", rank) : s;
}

#define SRT_OP(name, source, check, args)                                                      \
  static srt_status run_##name(srt_exec *e SRT_OP_PARAMS(args)) {                              \
    const char *op = "srt_op_" #name;                                                          \
    SRT_RETURN_IF_ERROR(srt_check_exec(e, op));                                                \
    CHECKS(args)                                                                               \
    SRT_RETURN_IF_ERROR(check);                                                                \
    if (e->backend->host) /* the cpu backend: MPI moves data only inside MPI calls */       \
      srt_collectives_progress(e->ctx);                                                        \
    srt_profile *profile = srt_context_profile(e->ctx);                                        \
    if (!profile)                                                                              \
      return ops_of(e)->name(e SRT_OP_ARGS(args));                                             \
    double t0 = now_seconds();                                                                 \
    srt_status s = ops_of(e)->name(e SRT_OP_ARGS(args));                                       \
    profile_add(profile, #name, t0);                                                           \
    return s;                                                                                  \
  }                                                                                            \
  srt_status srt_op_##name(srt_exec *e SRT_OP_PARAMS(args)) {                                  \
    return at_rank(e, run_##name(e SRT_OP_ARGS(args)));                                        \
  }
#include "shardrt/ops.def"
