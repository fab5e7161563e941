// A parameter's arena buffers as srt_tensor views (value, gradient, moments).
#include <string.h>

#include "train_internal.h"

srt_tensor train_param_view(const srt_param_info *pi, const char *name, uint8_t *arena,
                            int64_t off) {
  srt_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dtype = SRT_F32;
  t.ndim = pi->rank;
  memcpy(t.global_shape, pi->global_shape, sizeof t.global_shape);
  memcpy(t.local_shape, pi->local_shape, sizeof t.local_shape);
  t.placements[SRT_MESH_DP] = pi->placement[SRT_MESH_DP];
  t.placements[SRT_MESH_TP] = pi->placement[SRT_MESH_TP];
  t.num_tp_blocks = pi->num_tp_blocks;
  memcpy(t.tp_blocks, pi->tp_blocks, sizeof t.tp_blocks);
  t.data = arena + off;
  return t;
}
