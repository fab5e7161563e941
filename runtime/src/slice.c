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
