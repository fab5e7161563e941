// The --summary report.
#include "summary.h"

#include <inttypes.h>
#include <string.h>

// Sums saturate at INT64_MAX rather than overflow (absurd configs).
static int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t import_summary_total(const import_model *m) {
  int64_t n = 0;
  for (int i = 0; i < m->num_params; ++i)
    n = add_sat(n, import_param_numel(&m->params[i]));
  return n;
}

int64_t import_summary_count(const import_model *m, import_param_kind kind) {
  int64_t n = 0;
  for (int i = 0; i < m->num_params; ++i)
    if (m->params[i].kind == kind)
      n = add_sat(n, import_param_numel(&m->params[i]));
  return n;
}

// `n` with thousands separators, into `buf` (at least 32 bytes).
static const char *grouped(int64_t n, char *buf) {
  char digits[24];
  int len = snprintf(digits, sizeof digits, "%" PRId64, n < 0 ? -n : n);
  char *p = buf;
  if (n < 0)
    *p++ = '-';
  for (int i = 0; i < len; ++i) {
    if (i && (len - i) % 3 == 0)
      *p++ = ',';
    *p++ = digits[i];
  }
  *p = '\0';
  return buf;
}

static void print_layers(FILE *out, const import_config *cfg) {
  static const struct {
    import_block kind;
    const char *name;
  } kinds[] = {
      {IMPORT_BLOCK_FULL, "full attention"},
      {IMPORT_BLOCK_SLIDING, "sliding window"},
      {IMPORT_BLOCK_MAMBA, "mamba2"},
      {IMPORT_BLOCK_ATTENTION, "attention"},
      {IMPORT_BLOCK_MLP, "mlp"},
  };
  fprintf(out, "layers: %" PRId64 " (", cfg->layers);
  const char *sep = "";
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; ++k) {
    int64_t n = import_config_count_blocks(cfg, kinds[k].kind);
    if (!n)
      continue;
    fprintf(out, "%s%" PRId64 " %s", sep, n, kinds[k].name);
    if (kinds[k].kind == IMPORT_BLOCK_SLIDING)
      fprintf(out, " %" PRId64, cfg->sliding_window);
    sep = ", ";
  }
  fprintf(out, ")\n");
}

void import_summary_print(FILE *out, const import_config *cfg,
                          const import_model *m) {
  char buf[32];
  fprintf(out, "model: %s\n", cfg->path);
  fprintf(out, "architecture: %s (model_type %s%s%s)\n", cfg->arch->architecture,
          cfg->arch->model_type, cfg->dtype[0] ? ", checkpoint dtype " : "",
          cfg->dtype);
  print_layers(out, cfg);
  fprintf(out, "heads: %" PRId64 " query, %" PRId64 " key/value, head_dim %" PRId64
               "\n",
          cfg->heads, cfg->kv_heads, cfg->head_dim);
  if (cfg->arch->family == IMPORT_NEMOTRON_H)
    fprintf(out, "mamba2: %" PRId64 " heads, head_dim %" PRId64 ", %" PRId64
                 " groups, state %" PRId64 ", conv kernel %" PRId64 ", chunk %" PRId64
                 ", dt >= %g\n",
            cfg->mamba_heads, cfg->mamba_head_dim, cfg->n_groups, cfg->ssm_state,
            cfg->conv_kernel, cfg->chunk_size, cfg->mamba_dt_min);
  fprintf(out, "hidden: %" PRId64 ", intermediate: %" PRId64 ", vocab: %" PRId64
               "\n",
          cfg->hidden, cfg->intermediate, cfg->vocab);
  fprintf(out, "parameters: %s in %d tensors\n", grouped(import_summary_total(m), buf),
          m->num_params);
  for (int k = 0; k < IMPORT_PARAM_KIND_COUNT; ++k) {
    int64_t n = import_summary_count(m, (import_param_kind)k);
    if (n)
      fprintf(out, "  %s: %s\n", import_param_kind_name((import_param_kind)k),
              grouped(n, buf));
  }
  if (m->tied_to >= 0)
    fprintf(out, "tied: %s = %s (counted once)\n", m->tied_name,
            m->params[m->tied_to].name);
  else
    fprintf(out, "tied: none\n");
  // The keys the config left to its class's defaults, one per line.
  if (cfg->defaults_used) {
    fprintf(out, "defaults:\n");
    for (const char *line = cfg->defaults_used; *line;) {
      const char *end = strchr(line, '\n');
      fprintf(out, "  %.*s\n", (int)(end - line), line);
      line = end + 1;
    }
  } else {
    fprintf(out, "defaults: none (every key is written)\n");
  }
}
