// The dp x tp mesh: shape validation and rank <-> coordinate (tp fastest).
#include "shardrt/mesh.h"

srt_status srt_mesh_init(srt_mesh *mesh, int world_size, int dp, int tp) {
  if (tp < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "mesh: tp must be >= 1, got tp=%d (dp=%d, world size %d)",
                     tp, dp, world_size);
  if (world_size < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "mesh: world size must be >= 1, got %d",
                     world_size);
  if (dp <= 0) {
    if (world_size % tp != 0)
      return SRT_ERROR(SRT_FAILED_PRECONDITION,
                       "mesh: world size %d is not divisible by tp=%d, so dp "
                       "cannot be inferred",
                       world_size, tp);
    dp = world_size / tp;
  }
  if ((long long)dp * tp != world_size)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "mesh: world size %d != dp (%d) x tp (%d) = %lld; launch "
                     "with -np %lld, or recompile with shard-compile --tp-size/--dp-size "
                     "matching the launch",
                     world_size, dp, tp, (long long)dp * tp, (long long)dp * tp);
  mesh->shape[SRT_MESH_DP] = dp;
  mesh->shape[SRT_MESH_TP] = tp;
  return NULL;
}

int srt_mesh_size(const srt_mesh *mesh) {
  return mesh->shape[SRT_MESH_DP] * mesh->shape[SRT_MESH_TP];
}

void srt_mesh_coord(const srt_mesh *mesh, int rank, int coord[SRT_MESH_NDIMS]) {
  coord[SRT_MESH_DP] = rank / mesh->shape[SRT_MESH_TP];
  coord[SRT_MESH_TP] = rank % mesh->shape[SRT_MESH_TP];
}

int srt_mesh_rank(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS]) {
  return coord[SRT_MESH_DP] * mesh->shape[SRT_MESH_TP] + coord[SRT_MESH_TP];
}
