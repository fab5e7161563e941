// The launch read from the environment (shardrt/launch_env.h): an MPI
// launcher, torchrun's variables or Slurm's.
#include "shardrt/launch_env.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const char *srt_launch_kind_name(srt_launch_kind kind) {
  switch (kind) {
  case SRT_LAUNCH_MPI: return "MPI";
  case SRT_LAUNCH_TORCHRUN: return "torchrun";
  case SRT_LAUNCH_SLURM: return "Slurm";
  case SRT_LAUNCH_NONE: break;
  }
  return "none";
}

// The decimal integer `name` holds, in [lo, hi]. Required: unset is an
// error naming the launch `kind` that needs it.
static srt_status env_int(srt_getenv_fn get, void *user, const char *kind, const char *name,
                          long lo, long hi, int *out) {
  const char *v = get(name, user);
  if (!v)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s launch: %s is not set", kind, name);
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || *end || errno)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s launch: %s='%s' is not a decimal integer",
                     kind, name, v);
  if (x < lo || x > hi)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s launch: %s=%ld is outside [%ld, %ld]", kind,
                     name, x, lo, hi);
  *out = (int)x;
  return NULL;
}

// Copies MASTER_ADDR (or the host `from` names) into out.
static srt_status copy_host(const char *kind, const char *from, const char *v, char *out) {
  size_t n = strlen(v);
  if (n == 0 || n >= SRT_LAUNCH_HOST_LEN)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s launch: %s='%s' is %s", kind, from, v,
                     n ? "too long for a host name" : "empty");
  memcpy(out, v, n + 1);
  return NULL;
}

// RANK, WORLD_SIZE and LOCAL_RANK under the names `names` gives (torchrun's
// or Slurm's); RANK is checked against the world size read first.
static srt_status read_ranks(srt_getenv_fn get, void *user, const char *kind,
                             const char *const names[3], srt_launch_env *e) {
  SRT_RETURN_IF_ERROR(env_int(get, user, kind, names[1], 1, INT_MAX, &e->world_size));
  SRT_RETURN_IF_ERROR(env_int(get, user, kind, names[0], 0, INT_MAX, &e->rank));
  if (e->rank >= e->world_size)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s launch: %s=%d is not below %s=%d", kind,
                     names[0], e->rank, names[1], e->world_size);
  return env_int(get, user, kind, names[2], 0, e->world_size - 1, &e->local_rank);
}

static srt_status read_torchrun(srt_getenv_fn get, void *user, srt_launch_env *e) {
  static const char *const names[3] = {"RANK", "WORLD_SIZE", "LOCAL_RANK"};
  SRT_RETURN_IF_ERROR(read_ranks(get, user, "torchrun", names, e));
  const char *addr = get("MASTER_ADDR", user);
  if (!addr)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "torchrun launch: MASTER_ADDR is not set");
  SRT_RETURN_IF_ERROR(copy_host("torchrun", "MASTER_ADDR", addr, e->master_addr));
  return env_int(get, user, "torchrun", "MASTER_PORT", 1, 65535, &e->master_port);
}

static srt_status read_slurm(srt_getenv_fn get, void *user, srt_launch_env *e) {
  static const char *const names[3] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};
  SRT_RETURN_IF_ERROR(read_ranks(get, user, "Slurm", names, e));
  const char *addr = get("MASTER_ADDR", user);
  if (addr) {
    SRT_RETURN_IF_ERROR(copy_host("Slurm", "MASTER_ADDR", addr, e->master_addr));
  } else {
    const char *list = get("SLURM_JOB_NODELIST", user);
    if (!list)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "Slurm launch: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set");
    SRT_RETURN_IF_ERROR(srt_slurm_first_host(list, e->master_addr, sizeof e->master_addr));
  }
  if (get("MASTER_PORT", user))
    return env_int(get, user, "Slurm", "MASTER_PORT", 1, 65535, &e->master_port);
  int job = 0;
  srt_status s = env_int(get, user, "Slurm", "SLURM_JOB_ID", 0, INT_MAX, &job);
  if (s)
    return srt_status_annotate(s, -1, "needed for the port when MASTER_PORT is unset");
  e->master_port = SRT_LAUNCH_SLURM_PORT_BASE + job % 10000;
  return NULL;
}

// SHARD_RENDEZVOUS_PORT, when set, replaces the port read. Under torchrun
// with TORCHELASTIC_USE_AGENT_STORE=True, MASTER_PORT is the port torchrun's
// own store listens on at rank 0's host, which rank 0 cannot listen on too:
// then SHARD_RENDEZVOUS_PORT is required.
static srt_status rendezvous_port(srt_getenv_fn get, void *user, srt_launch_env *e) {
  const char *kind = srt_launch_kind_name(e->kind);
  if (get("SHARD_RENDEZVOUS_PORT", user))
    return env_int(get, user, kind, "SHARD_RENDEZVOUS_PORT", 1, 65535, &e->master_port);
  const char *agent = get("TORCHELASTIC_USE_AGENT_STORE", user);
  if (e->kind == SRT_LAUNCH_TORCHRUN && agent && !strcmp(agent, "True"))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "torchrun launch: MASTER_PORT=%d is torchrun's own "
                     "store (TORCHELASTIC_USE_AGENT_STORE=True), which rank 0 cannot listen "
                     "on too: set SHARD_RENDEZVOUS_PORT to another free port, the same on "
                     "every process", e->master_port);
  return NULL;
}

srt_status srt_launch_env_read(srt_getenv_fn get, void *user, srt_launch_env *out) {
  srt_launch_env e = {.kind = SRT_LAUNCH_NONE, .world_size = 1};
  srt_status s = NULL;
  if (get("OMPI_COMM_WORLD_SIZE", user) || get("PMIX_RANK", user))
    e.kind = SRT_LAUNCH_MPI;
  else if (get("RANK", user) || get("WORLD_SIZE", user))
    e.kind = SRT_LAUNCH_TORCHRUN, s = read_torchrun(get, user, &e);
  else if (get("SLURM_PROCID", user))
    e.kind = SRT_LAUNCH_SLURM, s = read_slurm(get, user, &e);
  if (!s && (e.kind == SRT_LAUNCH_TORCHRUN || e.kind == SRT_LAUNCH_SLURM)) {
    s = rendezvous_port(get, user, &e);
    e.start_timeout_s = SRT_LAUNCH_START_TIMEOUT;
    if (!s && get("SHARD_RENDEZVOUS_TIMEOUT", user))
      s = env_int(get, user, srt_launch_kind_name(e.kind), "SHARD_RENDEZVOUS_TIMEOUT", 1, 86400,
                  &e.start_timeout_s);
  }
  if (!s)
    *out = e;
  return s;
}

static const char *process_getenv(const char *name, void *user) {
  (void)user;
  return getenv(name);
}

srt_status srt_launch_env_from_environ(srt_launch_env *out) {
  return srt_launch_env_read(process_getenv, NULL, out);
}

// Appends the first element of the bracket at *p (just past '[') to out:
// the text up to the first '-', ',' or ']'; moves *p past the ']'.
static bool first_of_bracket(const char **p, char *out, size_t *n, size_t len) {
  const char *q = *p;
  size_t k = strcspn(q, "-,]");
  const char *close = strchr(q, ']');
  if (k == 0 || !close || q[k] == '\0' || *n + k >= len)
    return false;
  memcpy(out + *n, q, k);
  *n += k;
  *p = close + 1;
  return true;
}

srt_status srt_slurm_first_host(const char *nodelist, char *out, size_t len) {
  size_t n = 0;
  const char *p = nodelist;
  while (*p && *p != ',') {
    if (*p == '[') {
      ++p;
      if (!first_of_bracket(&p, out, &n, len))
        return SRT_ERROR(SRT_INVALID_ARGUMENT,
                         "Slurm launch: SLURM_JOB_NODELIST='%s': an empty or unclosed "
                         "bracket, or a first host longer than %zu bytes",
                         nodelist, len - 1);
      continue;
    }
    if (*p == ']' || n + 1 >= len)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "Slurm launch: SLURM_JOB_NODELIST='%s': %s", nodelist,
                       *p == ']' ? "a ']' without its '['" : "the first host is too long");
    out[n++] = *p++;
  }
  if (n == 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "Slurm launch: SLURM_JOB_NODELIST='%s' names no first host", nodelist);
  out[n] = '\0';
  return NULL;
}
