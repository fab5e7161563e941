// Liveness-based first-fit placement of temporaries in the arena.
#include "memory_plan.h"

#include <stdlib.h>

int64_t tp_align(int64_t bytes) {
  return (bytes + TP_BUFFER_ALIGN - 1) / TP_BUFFER_ALIGN * TP_BUFFER_ALIGN;
}

static int by_first(const void *a, const void *b) {
  const tp_interval *x = *(const tp_interval *const *)a, *y = *(const tp_interval *const *)b;
  return (x->first > y->first) - (x->first < y->first);
}

static int by_offset(const void *a, const void *b) {
  const tp_interval *x = *(const tp_interval *const *)a, *y = *(const tp_interval *const *)b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

int64_t tp_plan_memory(tp_interval *intervals, int n, int64_t base) {
  tp_interval **order = malloc((size_t)(n + 1) * sizeof *order);
  tp_interval **live = malloc((size_t)(n + 1) * sizeof *live);
  if (!order || !live) {
    free(order);
    free(live);
    return -1;
  }
  for (int i = 0; i < n; ++i)
    order[i] = &intervals[i];
  qsort(order, (size_t)n, sizeof *order, by_first);
  int nlive = 0;
  int64_t peak = base;
  for (int i = 0; i < n; ++i) {
    tp_interval *v = order[i];
    // Drop the buffers dead before this definition; keep the rest by offset.
    int kept = 0;
    for (int j = 0; j < nlive; ++j)
      if (live[j]->last >= v->first)
        live[kept++] = live[j];
    nlive = kept;
    qsort(live, (size_t)nlive, sizeof *live, by_offset);
    int64_t size = tp_align(v->bytes > 0 ? v->bytes : 1), at = base;
    for (int j = 0; j < nlive; ++j) {
      if (live[j]->offset - at >= size)
        break;
      int64_t end = live[j]->offset + tp_align(live[j]->bytes > 0 ? live[j]->bytes : 1);
      if (end > at)
        at = end;
    }
    v->offset = at;
    live[nlive++] = v;
    if (at + size > peak)
      peak = at + size;
  }
  free(order);
  free(live);
  return peak;
}
