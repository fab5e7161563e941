// Writing safetensors files (and temporary directories) for tests.
#include "st_writer.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool st_write_raw(const char *path, uint64_t header_len, const char *header,
                  size_t header_bytes, const void *data, size_t data_len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = (unsigned char)(header_len >> (8 * i));
  bool ok = fwrite(len, 1, 8, f) == 8 &&
            fwrite(header, 1, header_bytes, f) == header_bytes;
  for (size_t i = 0; ok && i < data_len; ++i)
    ok = fputc(data ? ((const unsigned char *)data)[i] : (int)(i & 0xff), f) != EOF;
  return fclose(f) == 0 && ok;
}

bool st_write_text(const char *path, const char *header, const void *data,
                   size_t data_len) {
  return st_write_raw(path, strlen(header), header, strlen(header), data, data_len);
}

static size_t dtype_size(const char *dtype) {
  if (!strcmp(dtype, "F64") || !strcmp(dtype, "I64"))
    return 8;
  if (!strcmp(dtype, "F32") || !strcmp(dtype, "I32"))
    return 4;
  if (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "I16"))
    return 2;
  return 1;
}

bool st_write(const char *path, const st_tensor *t, int n) {
  size_t cap = 256 + (size_t)n * 256, len = 0, offset = 0;
  char *header = malloc(cap);
  if (!header)
    return false;
  len += (size_t)snprintf(header + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int i = 0; i < n; ++i) {
    size_t bytes = dtype_size(t[i].dtype);
    len += (size_t)snprintf(header + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                            t[i].name, t[i].dtype);
    for (int d = 0; d < t[i].rank; ++d) {
      len += (size_t)snprintf(header + len, cap - len, "%s%lld", d ? "," : "",
                              (long long)t[i].shape[d]);
      bytes *= (size_t)t[i].shape[d];
    }
    len += (size_t)snprintf(header + len, cap - len, "],\"data_offsets\":[%zu,%zu]}",
                            offset, offset + bytes);
    offset += bytes;
  }
  len += (size_t)snprintf(header + len, cap - len, "}");
  while (len % 8)
    header[len++] = ' ';
  unsigned char *data = malloc(offset ? offset : 1);
  if (!data) {
    free(header);
    return false;
  }
  offset = 0;
  for (int i = 0; i < n; ++i) {
    size_t bytes = dtype_size(t[i].dtype);
    for (int d = 0; d < t[i].rank; ++d)
      bytes *= (size_t)t[i].shape[d];
    memset(data + offset, i + 1, bytes);
    offset += bytes;
  }
  bool ok = st_write_raw(path, len, header, len, data, offset);
  free(header);
  free(data);
  return ok;
}

char *st_make_temp_dir(void) {
  const char *tmp = getenv("TMPDIR");
  char buf[4096];
  snprintf(buf, sizeof buf, "%s/shard-import-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  return mkdtemp(buf) ? strdup(buf) : NULL;
}

void st_remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}
