// Element type sizes and names (safetensors spelling).
#include "shardrt/types.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  size_t size;
} kDtypes[SRT_DTYPE_COUNT] = {
    [SRT_F64] = {"F64", 8}, [SRT_F32] = {"F32", 4},  [SRT_F16] = {"F16", 2},
    [SRT_BF16] = {"BF16", 2}, [SRT_I64] = {"I64", 8}, [SRT_I32] = {"I32", 4},
    [SRT_I16] = {"I16", 2}, [SRT_I8] = {"I8", 1},    [SRT_U8] = {"U8", 1},
    [SRT_BOOL] = {"BOOL", 1},
};

size_t srt_dtype_size(srt_dtype dtype) {
  return (unsigned)dtype < SRT_DTYPE_COUNT ? kDtypes[dtype].size : 0;
}

const char *srt_dtype_name(srt_dtype dtype) {
  return (unsigned)dtype < SRT_DTYPE_COUNT ? kDtypes[dtype].name : "?";
}

const char *srt_shape_format(char *buf, size_t len, int rank, const int64_t *shape) {
  size_t at = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < rank && at < len; ++d)
    at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (at < len)
    snprintf(buf + at, len - at, "]");
  return buf;
}

srt_dtype srt_dtype_parse(const char *name, size_t len) {
  for (int d = 0; d < SRT_DTYPE_COUNT; ++d)
    if (strlen(kDtypes[d].name) == len && !memcmp(kDtypes[d].name, name, len))
      return (srt_dtype)d;
  return SRT_DTYPE_COUNT;
}
