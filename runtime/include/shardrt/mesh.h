// The dp x tp process mesh: its shape and the mapping between a world rank
// and its mesh coordinate (tp fastest). Pure arithmetic, no MPI.
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

/// The shape of the mesh: `shape[SRT_MESH_DP]` data-parallel replicas of
/// `shape[SRT_MESH_TP]` tensor-parallel ranks each. A plain value; copy freely.
typedef struct srt_mesh {
  int shape[SRT_MESH_NDIMS];
} srt_mesh;

//===----------------------------------------------------------------------===//
// Construction and rank <-> coordinate
//===----------------------------------------------------------------------===//

/// Fills `*mesh` with shape dp x tp for a world of `world_size` processes.
/// `dp <= 0` means "world_size / tp". Errors (SRT_INVALID_ARGUMENT for
/// tp < 1; SRT_FAILED_PRECONDITION when world_size != dp * tp, or when tp
/// does not divide world_size with dp inferred) name all three numbers.
srt_status srt_mesh_init(srt_mesh *mesh, int world_size, int dp, int tp);

/// Number of ranks in the mesh (dp * tp).
int srt_mesh_size(const srt_mesh *mesh);

/// The coordinate of world rank `rank` (0 <= rank < srt_mesh_size), tp
/// fastest: rank = coord[SRT_MESH_DP] * tp + coord[SRT_MESH_TP]. So the tp
/// group of a rank is a run of consecutive ranks (the ranks sharing a node
/// in a typical launch), and a dp group strides by tp.
void srt_mesh_coord(const srt_mesh *mesh, int rank, int coord[SRT_MESH_NDIMS]);

/// The world rank at `coord` (inverse of srt_mesh_coord).
int srt_mesh_rank(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS]);

#endif // SHARDRT_MESH_H
