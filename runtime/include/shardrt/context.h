// srt_context: the runtime's one piece of mutable state per process — MPI,
// the dp x cp x tp mesh, its communicators (world, dp, tp, dp_cp, cp,
// created once)
// and the buffers the runtime allocates up front (arena, collective scratch).
#ifndef SHARDRT_CONTEXT_H
#define SHARDRT_CONTEXT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "shardrt/arena.h"
#include "shardrt/mesh.h"
#include "shardrt/status.h"

//===----------------------------------------------------------------------===//
// Groups
//===----------------------------------------------------------------------===//

/// The process groups of a context. Each is one MPI communicator created by
/// srt_context_create and freed by srt_context_destroy; collectives never
/// create communicators.
typedef enum srt_group_kind {
  SRT_GROUP_WORLD, ///< every rank of the mesh (a duplicate of the caller's comm)
  SRT_GROUP_DP,    ///< ranks with the same cp and tp coordinates (size dp)
  SRT_GROUP_TP,    ///< ranks with the same dp and cp coordinates (size tp)
  SRT_GROUP_DP_CP, ///< ranks with the same tp coordinate (size dp x cp)
  SRT_GROUP_CP,    ///< ranks with the same dp and tp coordinates (size cp)
  SRT_GROUP_COUNT,
} srt_group_kind;

/// A process group. Owned by its context; valid until srt_context_destroy.
/// A group's rank within it equals the rank's mesh coordinate on that axis
/// (dp index in dp, tp index in tp, cp index in cp, dp index x cp + cp
/// index in dp_cp).
typedef struct srt_group srt_group;

/// Size of the group (>= 1).
int srt_group_size(const srt_group *group);

/// This process's rank in the group, 0 <= rank < size.
int srt_group_rank(const srt_group *group);

/// "world", "dp", "tp", "dp_cp" or "cp" (used in error messages).
const char *srt_group_name(const srt_group *group);

/// The group's MPI communicator, for callers who want to add their own MPI
/// traffic. Owned by the context: do not free it.
MPI_Comm srt_group_comm(const srt_group *group);

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

/// A context and its groups are not thread-safe: use them from one thread
/// at a time (collectives share the context's scratch buffer).
typedef struct srt_context srt_context;

/// What srt_context_create builds. Start from srt_context_default_options().
typedef struct srt_context_options {
  int dp;               ///< data-parallel size; <= 0: world size / (cp x tp)
  int cp;               ///< context-parallel size; <= 0: 1
  int tp;               ///< tensor-parallel size (>= 1)
  MPI_Comm comm;        ///< the processes of the mesh; MPI_COMM_NULL: MPI_COMM_WORLD
  size_t arena_bytes;   ///< size of the per-rank arena (srt_context_arena); 0: none
  size_t scratch_bytes; ///< initial collective scratch (grows on demand if short)
  double timeout_s;     ///< deadline of every collective, seconds; <= 0: none
  /// An env launch's TCP mesh (shardrt/tcp_mesh.h), or NULL. With one, the
  /// world is the mesh's ranks, every group's collectives run over its
  /// sockets (collectives_tcp.h) and the context never calls MPI (nor
  /// starts it; `comm` is ignored). Owned by the caller; must outlive the
  /// context.
  const struct srt_tcp_mesh *tcp_mesh;
} srt_context_options;

/// dp = 0 (inferred), cp = 1, tp = 1, comm = MPI_COMM_NULL, no arena, no scratch,
/// collectives time out after 600 s (torch.distributed's default process
/// group timeout).
srt_context_options srt_context_default_options(void);

/// Creates a context. Collective over `options->comm`: every rank must call
/// it with the same dp, cp and tp (checked: a mismatch fails on every rank).
///
/// Initialises MPI (MPI_Init) if nobody has; then srt_context_destroy also
/// finalises it, and MPI cannot be initialised again in this process — so a
/// program that creates several contexts initialises MPI itself. Duplicates
/// `comm` (the runtime's traffic never mixes with the caller's), sets
/// MPI_ERRORS_RETURN on every communicator so that MPI failures come back
/// as statuses, then splits it once into the dp, tp, dp_cp and cp groups.
///
/// Errors: SRT_FAILED_PRECONDITION when the world size is not dp x cp x tp
/// (the message names the world size, dp, cp and tp) or MPI was already finalised;
/// SRT_INVALID_ARGUMENT for a bad option or ranks disagreeing on the mesh;
/// SRT_UNAVAILABLE for an MPI failure (naming the call); SRT_RESOURCE_EXHAUSTED
/// when the arena cannot be allocated. On error *out is NULL and nothing leaks.
srt_status srt_context_create(const srt_context_options *options,
                              srt_context **out);

/// Frees the communicators, arena and scratch, and finalises MPI if
/// srt_context_create initialised it. Collective (MPI_Comm_free). NULL is
/// fine. Always releases everything; returns the first MPI error, if any.
srt_status srt_context_destroy(srt_context *ctx);

/// The mesh shape: dp x cp x tp.
const srt_mesh *srt_context_mesh(const srt_context *ctx);

/// The mesh placements index (srt_mesh_placement): {{dp x cp, tp}}. What
/// slices, gathers and checks of distributed tensors use.
const srt_mesh *srt_context_placement_mesh(const srt_context *ctx);

/// This rank's world rank (its rank in the communicator given at creation).
int srt_context_rank(const srt_context *ctx);

/// This rank's coordinate on the placement mesh: coord[SRT_MESH_DP] = dp
/// index x cp + cp index (its rank in the dp_cp group), coord[SRT_MESH_TP].
/// Without context parallelism, the dp and tp indices.
void srt_context_coord(const srt_context *ctx, int coord[SRT_MESH_NDIMS]);

/// The group `kind` (owned by ctx).
srt_group *srt_context_group(srt_context *ctx, srt_group_kind kind);

/// The per-rank arena (owned by ctx), or NULL if options.arena_bytes was 0.
srt_arena *srt_context_arena(srt_context *ctx);

/// Records the training step the context's collectives belong to (named by
/// a deadline's error). 0 before the first step.
void srt_context_set_step(srt_context *ctx, int64_t step);

/// The step srt_context_set_step recorded last (0 before the first).
int64_t srt_context_step(const srt_context *ctx);

struct srt_profile;

/// Attaches `profile` (shardrt/profile.h; NULL detaches): from now on every
/// srt_op_X call on this context adds its wall seconds to its kind. On a
/// device backend the time is the host's (launches, not kernels).
/// Not owned; it must outlive the attachment.
void srt_context_set_profile(srt_context *ctx, struct srt_profile *profile);

/// The attached profile, or NULL.
struct srt_profile *srt_context_profile(const srt_context *ctx);

/// The deadline of every collective in seconds (srt_context_options.
/// timeout_s; <= 0: none), which other collective layers (the cuda
/// backend's NCCL waits) apply too.
double srt_context_timeout(const srt_context *ctx);

#endif // SHARDRT_CONTEXT_H
