// The dp x cp x tp mesh: shape validation and rank <-> coordinate (tp
// fastest, then cp, then dp).
#include "shardrt/mesh.h"

srt_status srt_mesh_init(srt_mesh *mesh, int world_size, int dp, int tp) {
  return srt_mesh_init_cp(mesh, world_size, dp, 1, tp);
}

srt_status srt_mesh_init_cp(srt_mesh *mesh, int world_size, int dp, int cp, int tp) {
  if (tp < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "mesh: tp must be >= 1, got tp=%d (dp=%d, world size %d)",
                     tp, dp, world_size);
  if (cp < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "mesh: cp must be >= 1, got cp=%d (dp=%d, tp=%d, world size %d)",
                     cp, dp, tp, world_size);
  if (world_size < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "mesh: world size must be >= 1, got %d",
                     world_size);
  long long slice = (long long)cp * tp;
  if (dp <= 0) {
    if (world_size % slice != 0 && cp == 1)
      return SRT_ERROR(SRT_FAILED_PRECONDITION,
                       "mesh: world size %d is not divisible by tp=%d, so dp "
                       "cannot be inferred",
                       world_size, tp);
    if (world_size % slice != 0)
      return SRT_ERROR(SRT_FAILED_PRECONDITION,
                       "mesh: world size %d is not divisible by cp=%d x tp=%d, so dp "
                       "cannot be inferred",
                       world_size, cp, tp);
    dp = (int)(world_size / slice);
  }
  if (dp * slice != world_size) {
    if (cp == 1) // the message of a mesh without context parallelism, as before
      return SRT_ERROR(SRT_FAILED_PRECONDITION,
                       "mesh: world size %d != dp (%d) x tp (%d) = %lld; launch "
                       "with -np %lld, or recompile with shard-compile --tp-size/--dp-size "
                       "matching the launch",
                       world_size, dp, tp, dp * slice, dp * slice);
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "mesh: world size %d != dp (%d) x cp (%d) x tp (%d) = %lld; launch "
                     "with -np %lld, or recompile with shard-compile "
                     "--dp-size/--cp-size/--tp-size matching the launch",
                     world_size, dp, cp, tp, dp * slice, dp * slice);
  }
  mesh->shape[SRT_MESH_DP] = dp;
  mesh->shape[SRT_MESH_TP] = tp;
  mesh->cp = cp;
  return NULL;
}

int srt_mesh_cp(const srt_mesh *mesh) { return mesh->cp > 1 ? mesh->cp : 1; }

srt_mesh srt_mesh_placement(const srt_mesh *mesh) {
  return (srt_mesh){{mesh->shape[SRT_MESH_DP] * srt_mesh_cp(mesh), mesh->shape[SRT_MESH_TP]}, 1};
}

int srt_mesh_size(const srt_mesh *mesh) {
  return mesh->shape[SRT_MESH_DP] * srt_mesh_cp(mesh) * mesh->shape[SRT_MESH_TP];
}

void srt_mesh_coord(const srt_mesh *mesh, int rank, int coord[SRT_MESH_NDIMS]) {
  coord[SRT_MESH_DP] = rank / (srt_mesh_cp(mesh) * mesh->shape[SRT_MESH_TP]);
  coord[SRT_MESH_TP] = rank % mesh->shape[SRT_MESH_TP];
}

int srt_mesh_cp_index(const srt_mesh *mesh, int rank) {
  return rank / mesh->shape[SRT_MESH_TP] % srt_mesh_cp(mesh);
}

int srt_mesh_rank(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS]) {
  return srt_mesh_rank_cp(mesh, coord, 0);
}

int srt_mesh_rank_cp(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS], int c) {
  return (coord[SRT_MESH_DP] * srt_mesh_cp(mesh) + c) * mesh->shape[SRT_MESH_TP] +
         coord[SRT_MESH_TP];
}
