// Contiguous runs of a box inside a row-major tensor (see slice.h).
#include "slice.h"

#include "shardrt/types.h"

void srt_slice_rows(int ndim, const int64_t *shape, const int64_t *offset,
                    const int64_t *box, srt_slice_row_fn fn, void *arg) {
  for (int d = 0; d < ndim; ++d)
    if (box[d] == 0)
      return;
  // Merge trailing dims that the box covers whole: dims [k, ndim) form one run.
  int k = ndim;
  int64_t run = 1;
  while (k > 0) {
    run *= box[k - 1];
    --k;
    if (box[k] != shape[k])
      break;
  }
  // Row-major strides of the full tensor, in elements.
  int64_t stride[SRT_MAX_RANK];
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    stride[d] = s;
    s *= shape[d];
  }
  int64_t idx[SRT_MAX_RANK] = {0}; // odometer over dims [0, k)
  int64_t dst = 0;
  for (;;) {
    int64_t src = 0;
    for (int d = 0; d < ndim; ++d)
      src += (offset[d] + (d < k ? idx[d] : 0)) * stride[d];
    fn(src, dst, run, arg);
    dst += run;
    int d = k - 1;
    while (d >= 0 && ++idx[d] == box[d])
      idx[d--] = 0;
    if (d < 0)
      return;
  }
}

typedef struct piece_arg {
  srt_slice_row_fn fn;
  void *arg;
  int64_t base; // the piece's first local element
} piece_arg;

static void piece_row(int64_t src, int64_t dst, int64_t n, void *arg) {
  piece_arg *a = arg;
  a->fn(src, a->base + dst, n, a->arg);
}

srt_status srt_slice_shard(const srt_tensor *t, const srt_mesh *mesh,
                           const int coord[SRT_MESH_NDIMS], srt_slice_row_fn fn, void *arg) {
  int64_t offset[SRT_MAX_RANK], box[SRT_MAX_RANK];
  srt_tensor_piece pieces[SRT_MAX_TP_BLOCKS];
  srt_status err = NULL;
  int n = srt_tensor_pieces(t, mesh, coord, offset, pieces, &err);
  if (n < 0)
    return err;
  if (t->ndim == 0) {
    srt_slice_rows(0, t->global_shape, offset, t->local_shape, fn, arg);
    return NULL;
  }
  int64_t row = srt_shape_numel(t->ndim - 1, t->local_shape + 1); // elements per local row
  for (int k = 0; k < n; ++k) {
    for (int d = 0; d < t->ndim; ++d)
      box[d] = t->local_shape[d];
    offset[0] = pieces[k].full_row;
    box[0] = pieces[k].rows;
    piece_arg pa = {fn, arg, pieces[k].local_row * row};
    srt_slice_rows(t->ndim, t->global_shape, offset, box, piece_row, &pa);
  }
  return NULL;
}
