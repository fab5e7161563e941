// The registry of our passes and their wrapping as MLIR external passes,
// with MLIR-style `{key=value ...}` option parsing.
#include "pass.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tp_pass_info *const kPasses[] = {
    &tp_nn_verify_pass,
    &tp_nn_autodiff_pass,
    &tp_nn_optimizer_pass,
    &tp_plan_pass,
    &tp_partition_pass,
    &tp_overlap_pass,
    &tp_shard_report_pass,
    &tp_lower_to_runtime_pass,
};

const tp_pass_info *const *tp_pass_list(int *count) {
  *count = (int)(sizeof(kPasses) / sizeof(kPasses[0]));
  return kPasses;
}

const tp_pass_info *tp_pass_lookup(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof(kPasses) / sizeof(kPasses[0]); ++i)
    if (strlen(kPasses[i]->argument) == len &&
        memcmp(kPasses[i]->argument, name, len) == 0)
      return kPasses[i];
  return NULL;
}

//===----------------------------------------------------------------------===//
// Pass instances
//===----------------------------------------------------------------------===//

// The user data of one external pass: its info and its parsed options.
typedef struct pass_instance {
  const tp_pass_info *info;
  tp_option_value values[];
} pass_instance;

static pass_instance *instance_alloc(const tp_pass_info *info) {
  pass_instance *p = calloc(1, sizeof(pass_instance) +
                                   (size_t)info->num_options * sizeof(tp_option_value));
  if (p)
    p->info = info;
  return p;
}

static void instance_free(void *data) {
  pass_instance *p = data;
  for (int i = 0; i < p->info->num_options; ++i)
    free(p->values[i].s);
  free(p);
}

static void *instance_clone(void *data) {
  const pass_instance *p = data;
  pass_instance *q = instance_alloc(p->info);
  if (!q)
    return NULL;
  for (int i = 0; i < p->info->num_options; ++i) {
    q->values[i] = p->values[i];
    q->values[i].s = p->values[i].s ? strdup(p->values[i].s) : NULL;
  }
  return q;
}

static void instance_construct(void *data) { (void)data; }

static void instance_run(MlirOperation op, MlirExternalPass pass, void *data) {
  const pass_instance *p = data;
  if (mlirLogicalResultIsFailure(p->info->run(op, p->values)))
    mlirExternalPassSignalFailure(pass);
}

//===----------------------------------------------------------------------===//
// Option parsing
//===----------------------------------------------------------------------===//

// Parses `text` (length `len`) as a value of `opt`'s type into `out`.
static bool parse_value(const tp_option_info *opt, const char *text, size_t len,
                        tp_option_value *out) {
  if (len >= 2 && text[0] == '"' && text[len - 1] == '"') {
    ++text;
    len -= 2;
  }
  char *copy = strndup(text, len);
  if (!copy)
    return false;
  char *end = NULL;
  bool ok = true;
  errno = 0;
  switch (opt->type) {
  case TP_OPTION_INT:
    out->i = strtoll(copy, &end, 10);
    ok = len > 0 && *end == '\0' && errno == 0;
    break;
  case TP_OPTION_FLOAT:
    out->f = strtod(copy, &end);
    ok = len > 0 && *end == '\0' && errno == 0;
    break;
  case TP_OPTION_BOOL:
    ok = true;
    if (!strcmp(copy, "true") || !strcmp(copy, "1"))
      out->b = true;
    else if (!strcmp(copy, "false") || !strcmp(copy, "0"))
      out->b = false;
    else
      ok = false;
    break;
  case TP_OPTION_STRING:
    free(out->s);
    out->s = copy;
    return true;
  }
  free(copy);
  return ok;
}

static const char *const kTypeNames[] = {"an integer", "a number", "true or false",
                                         "a string"};

// Splits `text` at spaces outside quotes and braces; calls parse for each
// `key=value`. Returns false with `err` set on the first problem.
static bool parse_options(pass_instance *p, const char *text, char *err,
                          size_t errlen) {
  const tp_pass_info *info = p->info;
  const char *s = text;
  while (*s) {
    while (*s == ' ')
      ++s;
    if (!*s)
      break;
    const char *start = s;
    int depth = 0;
    bool quoted = false;
    for (; *s && (quoted || depth > 0 || *s != ' '); ++s) {
      if (*s == '"')
        quoted = !quoted;
      else if (!quoted && *s == '{')
        ++depth;
      else if (!quoted && *s == '}')
        --depth;
    }
    const char *eq = memchr(start, '=', (size_t)(s - start));
    size_t keylen = eq ? (size_t)(eq - start) : (size_t)(s - start);
    const tp_option_info *opt = NULL;
    int index = 0;
    for (; index < info->num_options; ++index)
      if (strlen(info->options[index].name) == keylen &&
          !memcmp(info->options[index].name, start, keylen)) {
        opt = &info->options[index];
        break;
      }
    if (!opt) {
      snprintf(err, errlen, "pass '%s' has no option '%.*s'", info->argument,
               (int)keylen, start);
      return false;
    }
    // A bare boolean flag means true, as in MLIR.
    const char *value = eq ? eq + 1 : "true";
    size_t vlen = eq ? (size_t)(s - eq - 1) : 4;
    if (!parse_value(opt, value, vlen, &p->values[index])) {
      snprintf(err, errlen, "pass '%s': option '%s' expects %s, got '%.*s'",
               info->argument, opt->name, kTypeNames[opt->type], (int)vlen,
               value);
      return false;
    }
  }
  return true;
}

// A new instance of `info` holding its defaults, or NULL (err set).
static pass_instance *instance_with_defaults(const tp_pass_info *info, char *err,
                                             size_t errlen) {
  pass_instance *p = instance_alloc(info);
  if (!p) {
    snprintf(err, errlen, "out of memory creating pass '%s'", info->argument);
    return NULL;
  }
  for (int i = 0; i < info->num_options; ++i) {
    const tp_option_info *opt = &info->options[i];
    if (!parse_value(opt, opt->default_value, strlen(opt->default_value), &p->values[i])) {
      snprintf(err, errlen, "pass '%s': bad default for option '%s'", info->argument,
               opt->name);
      instance_free(p);
      return NULL;
    }
  }
  return p;
}

// The MLIR external pass running instance `p` (which it then owns).
static MlirPass wrap(pass_instance *p) {
  const tp_pass_info *info = p->info;
  MlirExternalPassCallbacks callbacks = {
      .construct = instance_construct,
      .destruct = instance_free,
      .initialize = NULL,
      .clone = instance_clone,
      .run = instance_run,
  };
  MlirDialectHandle dialect = info->creates ? info->creates() : (MlirDialectHandle){NULL};
  // The info struct is static and pointer-aligned: a unique TypeID address.
  return mlirCreateExternalPass(
      mlirTypeIDCreate(info), mlirStringRefCreateFromCString(info->argument),
      mlirStringRefCreateFromCString(info->argument),
      mlirStringRefCreateFromCString(info->summary),
      mlirStringRefCreateFromCString(info->anchor), info->creates ? 1 : 0, &dialect,
      callbacks, p);
}

MlirPass tp_pass_create(const tp_pass_info *info, const char *options, char *err,
                        size_t errlen) {
  pass_instance *p = instance_with_defaults(info, err, errlen);
  if (!p)
    return (MlirPass){NULL};
  if (options && !parse_options(p, options, err, errlen)) {
    instance_free(p);
    return (MlirPass){NULL};
  }
  return wrap(p);
}

MlirPass tp_pass_create_with(const tp_pass_info *info, int n, const tp_option_setting *settings,
                             char *err, size_t errlen) {
  pass_instance *p = instance_with_defaults(info, err, errlen);
  if (!p)
    return (MlirPass){NULL};
  for (int k = 0; k < n; ++k) {
    int i = 0;
    while (i < info->num_options && strcmp(info->options[i].name, settings[k].name))
      ++i;
    if (i == info->num_options) {
      snprintf(err, errlen, "pass '%s' has no option '%s'", info->argument, settings[k].name);
      instance_free(p);
      return (MlirPass){NULL};
    }
    free(p->values[i].s);
    p->values[i] = settings[k].value;
    p->values[i].s = settings[k].value.s ? strdup(settings[k].value.s) : NULL;
    if (info->options[i].type == TP_OPTION_STRING && !p->values[i].s) {
      snprintf(err, errlen, "pass '%s': option '%s' needs a string", info->argument,
               settings[k].name);
      instance_free(p);
      return (MlirPass){NULL};
    }
  }
  return wrap(p);
}
