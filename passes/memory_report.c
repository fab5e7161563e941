// The per-rank memory report of a compiled step (see memory_report.h).
#include "memory_report.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnostic.h"
#include "shardrt/output.h"

char *tp_memory_report_json(const tp_memory_figures *f) {
  json_t *o = json_pack(
      "{s:s, s:{s:I, s:I, s:s}, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:I, "
      "s:I, s:{s:I, s:I, s:I, s:I, s:s}, s:I, s:I, s:I}",
      "backend", f->backend, "mesh", "dp", (json_int_t)f->dp, "tp", (json_int_t)f->tp,
      "dp_parameters", f->fsdp ? "fsdp" : "replicated",
      "batch", (json_int_t)f->batch, "micro_batch_per_rank", (json_int_t)f->micro_batch,
      "grad_accum_steps", (json_int_t)f->accum, "seq", (json_int_t)f->seq, "persistent_bytes",
      (json_int_t)f->persistent, "persistent", "params", (json_int_t)f->params, "grads",
      (json_int_t)f->grads, "moments", (json_int_t)f->moments, "compute_copies",
      (json_int_t)f->compute_copies, "inputs", (json_int_t)f->inputs,
      "temporaries_peak_bytes", (json_int_t)f->temporaries, "temporaries_live_peak_bytes",
      (json_int_t)f->peak_live, "live_at_peak", "activations", (json_int_t)f->peak_forward,
      "backward", (json_int_t)f->peak_backward, "optimizer", (json_int_t)f->peak_optimizer,
      "gathered_params", (json_int_t)f->peak_gathered,
      "at_module", f->peak_module, "gathered_params_max_bytes", (json_int_t)f->gathered_max,
      "workspace_bytes", (json_int_t)f->workspace, "total_bytes",
      (json_int_t)f->total);
  json_t *mesh = o ? json_object_get(o, "mesh") : NULL;
  if (mesh && json_object_set_new(mesh, "cp", json_integer(f->cp)) != 0) {
    json_decref(o);
    o = NULL;
  }
  const tp_cp_traffic *c = &f->cp_traffic;
  if (o && c->cp > 1 &&
      json_object_set_new(o, "cp_attention",
                          json_pack("{s:I, s:I, s:I, s:I}", "layers", (json_int_t)c->backward_ops,
                                    "kv_all_gather_bytes_per_layer",
                                    (json_int_t)c->gather_per_layer,
                                    "kv_grad_reduce_scatter_bytes_per_layer",
                                    (json_int_t)c->grad_per_layer, "bytes_per_step",
                                    (json_int_t)c->step)) != 0) {
    json_decref(o);
    o = NULL;
  }
  if (o && json_object_set_new(o, "cpu_offload", json_boolean(f->cpu_offload)) != 0) {
    json_decref(o);
    o = NULL;
  }
  if (o && f->cpu_offload &&
      json_object_set_new(o, "host",
                          json_pack("{s:I, s:I, s:I, s:I}", "pinned_bytes",
                                    (json_int_t)f->host_total, "params",
                                    (json_int_t)f->host_params, "moments",
                                    (json_int_t)f->host_moments, "staging",
                                    (json_int_t)f->host_staging)) != 0) {
    json_decref(o);
    o = NULL;
  }
  char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  return text;
}

static size_t line(char *buf, size_t size, size_t at, const char *name, int64_t bytes,
                   const char *note) {
  if (at >= size)
    return at;
  int n = snprintf(buf + at, size - at, "  %-28s %16lld bytes %10.3f GiB%s%s\n", name,
                   (long long)bytes, (double)bytes / (1024.0 * 1024 * 1024), note ? "  " : "",
                   note ? note : "");
  return n > 0 ? at + (size_t)n : at;
}

void tp_memory_report_text(const tp_memory_figures *f, char *buf, size_t size) {
  if (!size)
    return;
  buf[0] = 0;
  char cp_axis[64] = "";
  if (f->cp > 1)
    snprintf(cp_axis, sizeof cp_axis, "cp=%lld x ", (long long)f->cp);
  int n = snprintf(buf, size,
                   "memory per rank (%s backend, mesh dp=%lld x %stp=%lld%s; a step of %lld "
                   "sequences of %lld: %lld micro-batch%s of %lld per rank):\n",
                   f->backend, (long long)f->dp, cp_axis, (long long)f->tp,
                   f->dp * f->cp > 1 ? (f->fsdp ? ", FSDP" : ", parameters replicated over dp")
                                     : "",
                   (long long)f->batch,
                   (long long)f->seq, (long long)f->accum, f->accum == 1 ? "" : "es",
                   (long long)f->micro_batch);
  size_t at = n > 0 ? (size_t)n : 0;
  at = line(buf, size, at, "persistent", f->persistent, f->cpu_offload ? "(on the device)" : NULL);
  if (!f->cpu_offload)
    at = line(buf, size, at, "  parameters (fp32)", f->params, NULL);
  at = line(buf, size, at, "  gradients (fp32)", f->grads, NULL);
  if (!f->cpu_offload)
    at = line(buf, size, at, "  AdamW moments (fp32)", f->moments, NULL);
  if (f->compute_copies)
    at = line(buf, size, at, "  compute copies (bf16)", f->compute_copies, NULL);
  at = line(buf, size, at, "  input ids, labels", f->inputs, NULL);
  at = line(buf, size, at, "temporaries (planned)", f->temporaries, NULL);
  char where[160];
  snprintf(where, sizeof where, "(at '%s')", f->peak_module);
  at = line(buf, size, at, "  most live at one op", f->peak_live, f->peak_module[0] ? where : NULL);
  at = line(buf, size, at, "    activations (forward)", f->peak_forward, NULL);
  at = line(buf, size, at, "    backward values", f->peak_backward, NULL);
  at = line(buf, size, at, "    optimizer values", f->peak_optimizer, NULL);
  if (f->fsdp) {
    at = line(buf, size, at, "    gathered parameters", f->peak_gathered, NULL);
    at = line(buf, size, at, "  gathered parameters, most", f->gathered_max, "(at any op)");
  }
  at = line(buf, size, at, "ops' scratch (largest known)", f->workspace, NULL);
  at = line(buf, size, at, "total", f->total, f->cpu_offload ? "(on the device)" : NULL);
  if (f->cp > 1) { // received per rank and attention layer
    at = line(buf, size, at, "cp: K/V all-gather", f->cp_traffic.gather_per_layer,
              "per layer, forward and again in the backward");
    at = line(buf, size, at, "cp: dK/dV reduce-scatter", f->cp_traffic.grad_per_layer,
              "per layer, backward");
  }
  if (!f->cpu_offload)
    return;
  at = line(buf, size, at, "host, pinned (--cpu-offload)", f->host_total, NULL);
  at = line(buf, size, at, "  parameters (fp32)", f->host_params, NULL);
  at = line(buf, size, at, "  AdamW moments (fp32)", f->host_moments, NULL);
  line(buf, size, at, "  staging (grads, bf16, ids)", f->host_staging, "(mirrors the device's)");
}

bool tp_memory_report_emit(const tp_memory_figures *f, const char *path, int64_t device_bytes,
                           MlirOperation at, const char *pass) {
  char text[4096];
  tp_memory_report_text(f, text, sizeof text);
  if (device_bytes > 0 && f->total > device_bytes) {
    tp_error(at, pass,
             "the step needs %lld bytes per rank (%.2f GiB), more than the device's %lld "
             "(--device-memory):\n%s",
             (long long)f->total, (double)f->total / (1024.0 * 1024 * 1024),
             (long long)device_bytes, text);
    return false;
  }
  if (!path || !*path)
    return true;
  fputs(text, stderr);
  // The shared writer (shardrt/output.h): a temporary of its own renamed
  // over the file, so two compiles at once each leave a whole report.
  char *json = tp_memory_report_json(f);
  size_t n = json ? strlen(json) : 0;
  if (json)
    json[n] = '\n'; // the NUL's byte: the file ends with a newline
  srt_status s = json ? srt_write_file("memory report", path, json, n + 1) : NULL;
  if (!json)
    tp_error(at, pass, "cannot write the memory report '%s': out of memory", path);
  else if (s)
    tp_error(at, pass, "cannot write the memory report: %s", srt_status_message(s));
  bool ok = json && !s;
  srt_status_free(s);
  free(json);
  return ok;
}
