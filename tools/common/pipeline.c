// Pipeline text -> pass manager, creating our passes ourselves (see pipeline.h).
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t'; }

bool tool_pipeline_split(const char *text, size_t len,
                         bool (*fn)(const char *, size_t, void *), void *data) {
  int depth = 0;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i <= len; ++i) {
    char c = i < len ? text[i] : ',';
    if (c == '"')
      quoted = !quoted;
    if (quoted)
      continue;
    if (c == '(' || c == '{')
      ++depth;
    else if (c == ')' || c == '}') {
      if (--depth < 0)
        return false;
    } else if (c == ',' && depth == 0) {
      size_t b = start, e = i;
      while (b < e && is_space(text[b]))
        ++b;
      while (e > b && is_space(text[e - 1]))
        --e;
      if (e > b && !fn(text + b, e - b, data))
        return false;
      start = i + 1;
    }
  }
  return depth == 0 && !quoted;
}

typedef struct add_ctx {
  MlirOpPassManager opm;
  char anchor[128]; // op the pass manager runs on, e.g. "builtin.module"
  char *err;
  size_t errlen;
  bool failed;
} add_ctx;

static void append_message(MlirStringRef s, void *data) {
  add_ctx *c = data;
  size_t used = strlen(c->err);
  if (used + 1 < c->errlen)
    snprintf(c->err + used, c->errlen - used, "%.*s", (int)s.length, s.data);
}

static bool add_element(const char *elem, size_t len, void *data);

// Adds our pass `info` with the options inside `{...}` (if any) of elem.
static bool add_ours(add_ctx *c, const tp_pass_info *info, const char *brace,
                     const char *elem, size_t len) {
  // MLIR aborts when an op-specific pass is nested under another op.
  if (info->anchor[0] && strcmp(info->anchor, c->anchor) != 0) {
    snprintf(c->err, c->errlen, "pass '%s' runs on '%s', not nested in '%s(...)'",
             info->argument, info->anchor, c->anchor);
    return false;
  }
  char *options = NULL;
  if (brace) {
    if (elem[len - 1] != '}') {
      snprintf(c->err, c->errlen, "malformed pass options in '%.*s'", (int)len, elem);
      return false;
    }
    options = strndup(brace + 1, (size_t)(elem + len - 1 - (brace + 1)));
  }
  MlirPass pass = tp_pass_create(info, options, c->err, c->errlen);
  free(options);
  if (!pass.ptr)
    return false;
  mlirOpPassManagerAddOwnedPass(c->opm, pass);
  return true;
}

static bool add_element(const char *elem, size_t len, void *data) {
  add_ctx *c = data;
  size_t name_len = 0;
  while (name_len < len && elem[name_len] != '(' && elem[name_len] != '{')
    ++name_len;
  // `anchor(inner)`: a nested pass manager.
  if (name_len < len && elem[name_len] == '(') {
    if (elem[len - 1] != ')') {
      snprintf(c->err, c->errlen, "unbalanced parentheses in '%.*s'", (int)len, elem);
      return false;
    }
    if (name_len == 0 || name_len >= sizeof c->anchor) {
      snprintf(c->err, c->errlen, "expected an op name before '(' in '%.*s'", (int)len, elem);
      return false;
    }
    add_ctx inner = *c;
    snprintf(inner.anchor, sizeof inner.anchor, "%.*s", (int)name_len, elem);
    inner.opm = mlirOpPassManagerGetNestedUnder(
        c->opm, mlirStringRefCreate(elem, name_len));
    if (!tool_pipeline_split(elem + name_len + 1, len - name_len - 2, add_element,
                             &inner)) {
      if (!c->err[0])
        snprintf(c->err, c->errlen, "malformed pipeline '%.*s'", (int)len, elem);
      return false;
    }
    return true;
  }
  const tp_pass_info *ours = tp_pass_lookup(elem, name_len);
  if (ours)
    return add_ours(c, ours, name_len < len ? elem + name_len : NULL, elem, len);
  c->err[0] = '\0';
  MlirLogicalResult r = mlirOpPassManagerAddPipeline(
      c->opm, mlirStringRefCreate(elem, len), append_message, c);
  return mlirLogicalResultIsSuccess(r);
}

bool tool_pipeline_add(MlirPassManager pm, const char *text, char *err,
                       size_t errlen) {
  err[0] = '\0';
  const char *anchor = "builtin.module(";
  size_t len = strlen(text);
  while (len && is_space(text[len - 1]))
    --len;
  while (len && is_space(*text)) {
    ++text;
    --len;
  }
  size_t alen = strlen(anchor);
  if (len < alen + 1 || strncmp(text, anchor, alen) != 0 || text[len - 1] != ')') {
    snprintf(err, errlen,
             "the pipeline must be anchored on the module: "
             "'builtin.module(...)', got '%.*s'", (int)len, text);
    return false;
  }
  add_ctx c = {mlirPassManagerGetAsOpPassManager(pm), "builtin.module", err, errlen, false};
  if (!tool_pipeline_split(text + alen, len - alen - 1, add_element, &c)) {
    if (!err[0])
      snprintf(err, errlen, "malformed pipeline '%.*s'", (int)len, text);
    return false;
  }
  return true;
}

// The op that upstream pass `elem` is restricted to, when it cannot run on
// a module: MLIR's pipeline parser names it ("Can't add pass 'X'
// restricted to 'gpu.module' ... did you intend to nest?") when the pass
// is parsed into a scratch pass manager on builtin.module. `anchor` is
// left empty for a pass that runs on a module (or any op).
static void restricted_anchor(MlirContext ctx, const char *elem, char *anchor, size_t n) {
  anchor[0] = '\0';
  size_t len = strlen(elem) + sizeof "builtin.module()";
  char *text = malloc(len);
  char said[1024] = "";
  add_ctx sink = {.err = said, .errlen = sizeof said};
  if (!text)
    return;
  snprintf(text, len, "builtin.module(%s)", elem);
  MlirPassManager probe = mlirPassManagerCreate(ctx);
  MlirLogicalResult r = mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(probe),
                                              mlirStringRefCreateFromCString(text),
                                              append_message, &sink);
  mlirPassManagerDestroy(probe);
  free(text);
  static const char kRestricted[] = "restricted to '";
  const char *name = strstr(said, kRestricted);
  name = name ? name + sizeof kRestricted - 1 : NULL;
  const char *end = name ? strchr(name, '\'') : NULL;
  if (mlirLogicalResultIsFailure(r) && end && end > name && (size_t)(end - name) < n &&
      strstr(end, "did you intend to nest?"))
    snprintf(anchor, n, "%.*s", (int)(end - name), name);
}

bool tool_pipeline_add_flag(MlirContext ctx, MlirPassManager pm, const char *flag,
                            char *err, size_t errlen) {
  err[0] = '\0';
  const char *eq = strchr(flag, '=');
  size_t name_len = eq ? (size_t)(eq - flag) : strlen(flag);
  add_ctx c = {mlirPassManagerGetAsOpPassManager(pm), "builtin.module", err, errlen, false};
  // `--name=opts` is `name{opts}` in pipeline syntax; strip one level of quotes.
  const char *opts = eq ? eq + 1 : "";
  size_t olen = strlen(opts);
  if (olen >= 2 && opts[0] == '"' && opts[olen - 1] == '"') {
    ++opts;
    olen -= 2;
  }
  size_t n = name_len + olen + 3;
  char *elem = malloc(n);
  if (!elem)
    return false;
  if (eq)
    snprintf(elem, n, "%.*s{%.*s}", (int)name_len, flag, (int)olen, opts);
  else
    snprintf(elem, n, "%.*s", (int)name_len, flag);
  // As mlir-opt's implicit nesting: an upstream pass restricted to one op
  // (convert-gpu-to-nvvm: gpu.module) runs nested under that op.
  char anchor[128] = "";
  if (!tp_pass_lookup(flag, name_len))
    restricted_anchor(ctx, elem, anchor, sizeof anchor);
  char *nested = anchor[0] ? malloc(strlen(anchor) + strlen(elem) + 3) : NULL;
  if (nested)
    sprintf(nested, "%s(%s)", anchor, elem);
  bool ok = add_element(nested ? nested : elem, strlen(nested ? nested : elem), &c);
  free(nested);
  free(elem);
  return ok;
}

bool tool_pipeline_add_tp_plan(MlirPassManager pm, const char *plan, int64_t tp, int64_t dp,
                               int64_t cp, bool sequence_parallel, bool dp_replicate,
                               char *err, size_t errlen) {
  tp_option_setting settings[] = {{"plan", {.s = (char *)plan}},
                                  {"tp", {.i = tp}},
                                  {"dp", {.i = dp}},
                                  {"sequence-parallel", {.b = sequence_parallel}},
                                  {"dp-replicate", {.b = dp_replicate}},
                                  {"cp", {.i = cp}}};
  MlirPass pass = tp_pass_create_with(&tp_plan_pass, 6, settings, err, errlen);
  if (!pass.ptr)
    return false;
  mlirPassManagerAddOwnedPass(pm, pass);
  return true;
}
