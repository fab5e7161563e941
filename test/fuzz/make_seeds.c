// Writes the binary seed inputs of the fuzz targets (committed under
// corpus/; regenerate with `ninja -C build-fuzz fuzz_make_seeds` and
// `build-fuzz/bin/fuzz_make_seeds test/fuzz/corpus`): valid files of each
// format, small so that mutations reach the headers. The JSON seeds
// (plans, configs) are copies of real files; see docs/fuzzing.md.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/checkpoint.h"
#include "shardrt/safetensors_write.h"
#include "shardrt/tokens.h"

static const char *g_root;

static void check(srt_status s) {
  if (s) {
    fprintf(stderr, "make_seeds: %s\n", srt_status_message(s));
    exit(1);
  }
}

static const char *path_of(const char *rel) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", g_root, rel);
  return buf;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f || fseek(f, 0, SEEK_END) || (*len = (size_t)ftell(f), fseek(f, 0, SEEK_SET))) {
    perror(path);
    exit(1);
  }
  char *buf = malloc(*len ? *len : 1);
  if (!buf || fread(buf, 1, *len, f) != *len) {
    perror(path);
    exit(1);
  }
  fclose(f);
  return buf;
}

static float g_emb[32], g_norm[4];
static uint16_t g_bf16[6];

static void safetensors_seeds(void) {
  int64_t s84[2] = {8, 4}, s4[1] = {4}, s23[2] = {2, 3}, s0[1] = {0};
  int64_t i64[3] = {1, -2, 3};
  int64_t s3[1] = {3};
  srt_safetensors_entry e[] = {
      {"model.embed_tokens.weight", SRT_F32, 2, s84, g_emb},
      {"model.norm.weight", SRT_F32, 1, s4, g_norm},
      {"bf16", SRT_BF16, 2, s23, g_bf16},
      {"ids", SRT_I64, 1, s3, i64},
      {"empty", SRT_F32, 1, s0, NULL},
      {"scalar", SRT_F32, 0, NULL, g_norm},
  };
  static const char *const meta[] = {"format", "pt"};
  check(srt_safetensors_write(path_of("safetensors/mixed.safetensors"), e, 6, meta, 1));
  check(srt_safetensors_write(path_of("safetensors/none.safetensors"), NULL, 0, NULL, 0));
}

static void token_seeds(void) {
  int64_t ids[24];
  for (int i = 0; i < 24; ++i)
    ids[i] = (i * 37) % 251;
  check(srt_tokens_write(path_of("tokens/bytes.tokens"), ids, 24, 256));
  for (int i = 0; i < 24; ++i)
    ids[i] = (i * 997) % 50000;
  check(srt_tokens_write(path_of("tokens/u16.tokens"), ids, 24, 50000));
  for (int i = 0; i < 24; ++i)
    ids[i] = (i * 99991) % 151936 + 70000;
  check(srt_tokens_write(path_of("tokens/u32.tokens"), ids, 24, 262144));
  // Version 2: three documents, prompts, a tokenizer name.
  const int64_t starts[4] = {0, 5, 6, 24}, prompts[3] = {2, 0, 7};
  srt_tokenizer_identity tok = {.kind = SRT_TOKENIZER_JSON, .digest = 0x0123456789abcdefull,
                                .name = "qwen/tokenizer.json"};
  check(srt_tokens_write_documents(path_of("tokens/documents.tokens"), ids, 24, 262144, starts,
                                   prompts, 3, &tok));
}

static void checkpoint_seeds(void) {
  int64_t s84[2] = {8, 4}, s4[1] = {4};
  srt_safetensors_entry w[] = {
      {"model.embed_tokens.weight", SRT_F32, 2, s84, g_emb},
      {"model.norm.weight", SRT_BF16, 1, s4, g_bf16},
  };
  static const char *const meta[] = {"format", "pt", "shardrt.step", "3",
                                     "shardrt.adam_step", "3", "shardrt.optimizer",
                                     "model.optim.safetensors"};
  check(srt_safetensors_write(path_of("checkpoint/model.safetensors"), w, 2, meta, 4));
  float sq[32];
  for (int i = 0; i < 32; ++i)
    sq[i] = g_emb[i] * g_emb[i];
  srt_safetensors_entry o[] = {
      {"model.embed_tokens.weight.exp_avg", SRT_F32, 2, s84, g_emb},
      {"model.embed_tokens.weight.exp_avg_sq", SRT_F32, 2, s84, sq},
  };
  check(srt_safetensors_write(path_of("checkpoint/model.optim.safetensors"), o, 2, meta, 3));
  srt_mesh mesh;
  check(srt_mesh_init(&mesh, 2, 1, 2));
  int coord[SRT_MESH_NDIMS] = {0, 1};
  srt_placement pl[SRT_MESH_NDIMS] = {srt_replicate(), srt_shard(0)};
  srt_tensor t;
  check(srt_tensor_init(&t, "model.embed_tokens.weight", SRT_F32, 2, s84, pl, &mesh));
  t.data = g_emb + 16;
  check(srt_checkpoint_save_local(path_of("checkpoint/local.safetensors"), &mesh, coord, &t, 1));
}

static void weights_seeds(void) {
  int64_t s84[2] = {8, 4}, s4[1] = {4};
  srt_safetensors_entry w[] = {
      {"model.embed_tokens.weight", SRT_F32, 2, s84, g_emb},
      {"model.norm.weight", SRT_F32, 1, s4, g_norm},
  };
  const char *tmp = path_of("weights/shard.tmp");
  char tmp_path[4096];
  snprintf(tmp_path, sizeof tmp_path, "%s", tmp);
  check(srt_safetensors_write(tmp_path, w, 2, NULL, 0));
  size_t len;
  char *shard = slurp(tmp_path, &len);
  remove(tmp_path);
  static const char index[] =
      "{\"metadata\": {\"total_size\": 144},\n \"weight_map\": {\n"
      "  \"model.embed_tokens.weight\": \"a.safetensors\",\n"
      "  \"model.norm.weight\": \"a.safetensors\"}}";
  FILE *f = fopen(path_of("weights/index-and-shard"), "wb");
  if (!f || fwrite(index, 1, strlen(index), f) != strlen(index) ||
      fwrite("\n--shard--\n", 1, 11, f) != 11 || fwrite(shard, 1, len, f) != len ||
      fclose(f)) {
    perror("weights seed");
    exit(1);
  }
  free(shard);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR (test/fuzz/corpus)\n");
    return 2;
  }
  g_root = argv[1];
  for (int i = 0; i < 32; ++i)
    g_emb[i] = (float)(i % 7) * 0.25f - 0.5f;
  for (int i = 0; i < 4; ++i)
    g_norm[i] = 1.0f + 0.125f * (float)i;
  for (int i = 0; i < 6; ++i)
    g_bf16[i] = (uint16_t)(0x3f80 + 0x10 * i); // 1.0, 1.125, ...
  safetensors_seeds();
  token_seeds();
  checkpoint_seeds();
  weights_seeds();
  return 0;
}
