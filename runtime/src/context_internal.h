// Internal layout of srt_context and srt_group, shared by context.c and the
// files that talk MPI (collectives.c), plus SRT_MPI: the one-word check that
// turns an MPI error code into an srt_status naming the call, group and rank.
#ifndef SHARDRT_CONTEXT_INTERNAL_H
#define SHARDRT_CONTEXT_INTERNAL_H

#include "shardrt/context.h"
#include "shardrt/tcp_mesh.h"
#include "shardrt/types.h"

// A group's TCP transport (an env launch's host plane; its collectives
// are collectives_tcp.c's).
struct srt_tcp_group {
  const srt_tcp_mesh *mesh; // the job's links (owned by the caller of the context)
  int *members;             // members[r]: the world rank of group rank r (owned)
  unsigned char *tmp;       // a reduction's received contributions (owned, grown)
  size_t tmp_bytes;
};

struct srt_group {
  MPI_Comm comm;       // MPI_COMM_NULL until created
  MPI_Comm side;       // a duplicate, for the arrival exchange of a deadline
  int size;
  int rank;            // rank in the group
  int world_rank;      // for messages
  const char *name;    // "world", "dp", "tp", "dp_cp"
  srt_context *ctx;    // owner (for the scratch buffer)
  // An env launch's TCP transport (collectives_tcp.h): the group's
  // members over the mesh's sockets, comm and side MPI_COMM_NULL; NULL:
  // the group is an MPI communicator.
  struct srt_tcp_group *tcp;
};

// A collective in flight (srt_*_start, collectives.h): its request and
// group; group NULL is a free slot. Owned by collectives.c, its only reader
// and writer; the context holds the table by value (no allocation on a step)
// and frees the staging buffers; teardown.c drains it before that.
typedef struct srt_pending {
  MPI_Request req;
  srt_group *group;
  const char *what;
  int rc; // an MPI error srt_collectives_progress saw, for the wait to report
  // A bucket's (srt_bucket_start): its kind, element size and total
  // elements per rank, and the staging buffer (owned, kept across steps).
  int bucket_kind;
  size_t elem;
  int64_t total;
  unsigned char *stage;
  size_t stage_bytes;
} srt_pending;

struct srt_context {
  srt_mesh mesh;
  srt_mesh placement;         // srt_mesh_placement(&mesh)
  int coord[SRT_MESH_NDIMS];  // on `placement`
  int owns_mpi;        // srt_context_create called MPI_Init
  srt_group groups[SRT_GROUP_COUNT];
  srt_arena arena;
  int has_arena;
  // Collective scratch: packing buffers for gathers/scatters along dims
  // other than 0. Grows to the largest request, then stays.
  void *scratch;
  size_t scratch_bytes;
  // Op scratch: working memory of the graph-level ops (ops.h: attention's
  // tiles and, with replicated KV, a run's lse and gathered heads; the
  // RMSNorm weight gradient's partials; the loss's statistics; the
  // optimizer's gradient table). Separate from the collective scratch because an op may
  // call a collective while holding it. Grows to the largest request (the
  // first training step), then stays; freed by srt_context_destroy.
  void *op_scratch;
  size_t op_scratch_bytes;
  double timeout_s; // deadline of each collective (srt_context_options)
  int64_t step;     // srt_context_set_step, for messages
  struct srt_profile *profile; // srt_context_set_profile, or NULL
  srt_pending pending[SRT_MAX_PENDING]; // non-blocking collectives in flight
  // The reductions of bf16 buffers (reduce_bf16.c), MPI_OP_NULL until
  // created.
  MPI_Op bf16_sum, bf16_max;
};

/// Returns `s` with the context of group `g` appended once (its name, the
/// rank in it, its size and the world rank; srt_status_annotate); NULL
/// returns NULL. Every error of a collective or a group names its group
/// through this, not by hand.
srt_status srt_group_annotate(const srt_group *g, srt_status s);

/// Makes the status for MPI error code `rc` returned by `call` on `group`.
srt_status srt_mpi_error(int rc, const char *call, const srt_group *group,
                         const char *file, int line);

/// Evaluates the MPI call `call`; on an error code returns, from the
/// enclosing function, an SRT_UNAVAILABLE status naming the call text, the
/// group `g`, its rank and the world rank, and MPI's error string.
#define SRT_MPI(g, call)                                                       \
  do {                                                                         \
    int srt_mpi_rc_ = (call);                                                  \
    if (srt_mpi_rc_ != MPI_SUCCESS)                                            \
      return srt_mpi_error(srt_mpi_rc_, #call, (g), __FILE__, __LINE__);      \
  } while (0)

/// A scratch buffer of at least `bytes` bytes owned by the group's context
/// (64-byte aligned, contents undefined; valid until the next call).
srt_status srt_context_scratch(srt_context *ctx, size_t bytes, void **out);

/// Frees what `ctx` holds and `ctx`; returns the first MPI error. `stuck`
/// is the error of a collective in flight that could not complete (see
/// teardown.c), or NULL: with one, MPI may still write the arena and the
/// staging buffers, so they are left allocated, MPI is left as it is and
/// `stuck` is returned (owned by the caller).
srt_status srt_context_release(srt_context *ctx, srt_status stuck);

/// The ops' scratch buffer (see srt_context.op_scratch): at least `bytes`
/// bytes, 64-byte aligned, contents undefined, valid until the next call.
/// Errors: SRT_RESOURCE_EXHAUSTED naming the size and the world rank.
srt_status srt_context_op_scratch(srt_context *ctx, size_t bytes, void **out);

/// Creates ctx's bf16_sum and bf16_max (reduce_bf16.c): MPI user ops over
/// bf16 bits sent as MPI_UINT16_T; the sum adds in fp32 and rounds each
/// partial sum to bf16, nearest even, as NCCL's bf16 sum does. Errors:
/// SRT_UNAVAILABLE for an MPI failure.
srt_status srt_bf16_reductions_create(srt_context *ctx);

/// acc[i] = bf16(acc[i] + x[i]) for n elements of bf16 bits: the fp32 sum
/// rounded to nearest even (NCCL's bf16 sum, reduce_bf16.c). The MPI sum
/// op and the TCP transport's reductions (collectives_tcp.c) both use it.
void srt_bf16_sum_into(uint16_t *acc, const uint16_t *x, int64_t n);

/// acc[i] = the larger value of acc[i] and x[i] (acc[i] where they compare
/// equal or either is a NaN), for n elements of bf16 bits; exact.
void srt_bf16_max_into(uint16_t *acc, const uint16_t *x, int64_t n);

/// Frees the ops srt_bf16_reductions_create made (those not MPI_OP_NULL).
void srt_bf16_reductions_free(srt_context *ctx);

#endif // SHARDRT_CONTEXT_INTERNAL_H
