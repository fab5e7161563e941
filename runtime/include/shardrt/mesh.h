// The dp x cp x tp process mesh: its shape and the mapping between a world
// rank and its mesh coordinate (tp fastest, then cp, then dp: Megatron-LM's
// order). Pure arithmetic, no MPI.
#ifndef SHARDRT_MESH_H
#define SHARDRT_MESH_H

#include <stddef.h>

#include "shardrt/status.h"

//===----------------------------------------------------------------------===//
// Mesh axes
//===----------------------------------------------------------------------===//

/// Axes of the mesh, in the order of `shard.grid @mesh(shape = DPxTP)`:
/// axis 0 is data parallel, axis 1 tensor parallel. A tensor's placements
/// are indexed by these.
enum {
  SRT_MESH_DP = 0,
  SRT_MESH_TP = 1,
  SRT_MESH_NDIMS = 2,
};

/// The shape of the mesh: `shape[SRT_MESH_DP]` data-parallel replicas, each
/// of `cp` context-parallel slices of `shape[SRT_MESH_TP]` tensor-parallel
/// ranks. `cp` 0 reads as 1, so a `{{dp, tp}}` initialiser is a mesh without
/// context parallelism. A plain value; copy freely.
///
/// Placements (indexed by the SRT_MESH_NDIMS axes) see dp and cp as one
/// axis, axis 0 of size dp x cp (srt_mesh_placement): a compiled step's
/// rows are its dp rank's rows cut into cp chunk rows, its parameters shard
/// over dp x cp under FSDP (torchtitan's dp_shard_cp), and its loss and
/// gradients reduce over dp x cp. Only the attention (which all-gathers K/V
/// over cp) and the driver's batch split tell dp and cp apart.
typedef struct srt_mesh {
  int shape[SRT_MESH_NDIMS];
  int cp;
} srt_mesh;

//===----------------------------------------------------------------------===//
// Construction and rank <-> coordinate
//===----------------------------------------------------------------------===//

/// Fills `*mesh` with shape dp x 1 x tp for a world of `world_size`
/// processes: srt_mesh_init_cp with cp = 1.
srt_status srt_mesh_init(srt_mesh *mesh, int world_size, int dp, int tp);

/// Fills `*mesh` with shape dp x cp x tp for a world of `world_size`
/// processes. `dp <= 0` means "world_size / (cp * tp)". Errors
/// (SRT_INVALID_ARGUMENT for cp < 1 or tp < 1; SRT_FAILED_PRECONDITION when
/// world_size != dp * cp * tp, or when cp * tp does not divide world_size
/// with dp inferred) name the world size, dp, cp and tp.
srt_status srt_mesh_init_cp(srt_mesh *mesh, int world_size, int dp, int cp, int tp);

/// The mesh placements index: {{dp x cp, tp}} with cp 1. A rank's
/// coordinate on it is {dp index x cp + cp index, tp index}, so it has the
/// same world rank as on `mesh` (tp fastest, then cp, then dp).
srt_mesh srt_mesh_placement(const srt_mesh *mesh);

/// The context-parallel size (>= 1).
int srt_mesh_cp(const srt_mesh *mesh);

/// Number of ranks in the mesh (dp * cp * tp).
int srt_mesh_size(const srt_mesh *mesh);

/// The coordinate of world rank `rank` (0 <= rank < srt_mesh_size), tp
/// fastest, then cp, then dp: rank = (coord[SRT_MESH_DP] * cp + c) * tp +
/// coord[SRT_MESH_TP], where c = srt_mesh_cp_index(mesh, rank). So the tp
/// group of a rank is a run of consecutive ranks (the ranks sharing a node
/// in a typical launch), a cp group strides by tp and a dp group by cp * tp.
void srt_mesh_coord(const srt_mesh *mesh, int rank, int coord[SRT_MESH_NDIMS]);

/// The cp coordinate of world rank `rank` (0 <= c < cp).
int srt_mesh_cp_index(const srt_mesh *mesh, int rank);

/// The world rank at `coord` and cp index 0 (the inverse of srt_mesh_coord
/// on a mesh without context parallelism).
int srt_mesh_rank(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS]);

/// The world rank at `coord` and cp index `c` (0 <= c < cp): the inverse of
/// srt_mesh_coord and srt_mesh_cp_index.
int srt_mesh_rank_cp(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS], int c);

#endif // SHARDRT_MESH_H
