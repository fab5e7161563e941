// libFuzzer target: loading a training checkpoint (runtime/src/checkpoint.c):
// its shardrt.* metadata (step counts, the optimizer file's name, the
// per-rank mesh and coordinate) and every tensor it holds, loaded whole and
// as the half a rank of a 1 x 2 mesh holds, with the CRC-32 and finiteness
// checks a load makes. An accepted optimizer name must be a plain file name
// and accepted step counts in range. (Pairing the weights file with its
// optimizer file is the driver's train_load, tested by e2e/checkpoint.)
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "shardrt/checkpoint.h"
#include "shardrt/dtensor.h"
#include "shardrt/mesh.h"
#include "shardrt/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { kMaxElements = 1 << 16 };

// Loads tensor `info` of `f` replicated on `mesh` and, when it has rows
// that tp = 2 divides, sharded on dim 0 at tp coordinate 1.
static void load(const srt_safetensors *f, const srt_tensor_info *info, float *buf) {
  srt_mesh mesh;
  srt_status_free(srt_mesh_init(&mesh, 2, 1, 2));
  int coord[SRT_MESH_NDIMS] = {0, 1};
  srt_placement replicated[SRT_MESH_NDIMS] = {srt_replicate(), srt_replicate()};
  srt_placement sharded[SRT_MESH_NDIMS] = {srt_replicate(), srt_shard(0)};
  srt_tensor t;
  srt_status s = srt_tensor_init(&t, info->name, SRT_F32, info->rank, info->shape,
                                 replicated, &mesh);
  if (s) {
    srt_status_free(s);
    return;
  }
  t.data = buf;
  srt_status_free(srt_checkpoint_load_shard(f, &mesh, coord, &t));
  srt_status_free(srt_checkpoint_load_local(f, &mesh, coord, &t));
  if (info->rank >= 1 && info->shape[0] % 2 == 0) {
    s = srt_tensor_init(&t, info->name, SRT_F32, info->rank, info->shape, sharded, &mesh);
    t.data = buf;
    if (!s)
      s = srt_checkpoint_load_shard(f, &mesh, coord, &t);
    srt_status_free(s);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("model.safetensors", data, size);
  srt_safetensors *f = NULL;
  srt_status s = srt_safetensors_open(path, &f);
  if (s) {
    srt_status_free(s);
    return 0;
  }
  srt_checkpoint_meta meta;
  s = srt_checkpoint_read_meta(f, &meta);
  // What an accepted file promises (checkpoint.h).
  if (!s && meta.optimizer &&
      (!*meta.optimizer || strchr(meta.optimizer, '/') || !strcmp(meta.optimizer, ".") ||
       !strcmp(meta.optimizer, "..") || meta.step < 0 || meta.adam_step < 0))
    abort();
  if (!s && (meta.step > SRT_CHECKPOINT_MAX_STEP || meta.adam_step > SRT_CHECKPOINT_MAX_STEP ||
             (meta.step >= 0 && meta.adam_step > meta.step)))
    abort();
  srt_status_free(s);
  static float buf[kMaxElements];
  for (size_t i = 0; i < srt_safetensors_count(f); ++i) {
    const srt_tensor_info *info = srt_safetensors_get(f, i);
    if (srt_tensor_numel(info) <= kMaxElements)
      load(f, info, buf);
  }
  srt_safetensors_close(f);
  return 0;
}
