// shard-rendezvous: the TCP rendezvous of an env launch on its own. Every
// process of the job runs it with torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or under srun (Slurm's); rank 0
// hands out a random payload (as a cuda job hands out NCCL's unique id)
// and every rank prints the payload's FNV-1a 64-bit hash and the table of
// the ranks' hosts, so a user sees that all ranks reach rank 0 and agree
// before starting a training job the same way. Exit status 0 on success,
// 1 when the rendezvous failed (the message says why), 2 on a usage error
// or when the environment holds no env launch.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/launch_env.h"
#include "shardrt/rendezvous.h"

static const char kUsage[] =
    "usage: shard-rendezvous [--timeout SECONDS] [--payload-bytes N] [--payload-out FILE]\n"
    "                        [--host-name NAME]\n"
    "Runs the TCP rendezvous of an env launch: rank 0 listens on MASTER_PORT, the other\n"
    "ranks connect to MASTER_ADDR:MASTER_PORT; rank 0 checks every rank's WORLD_SIZE and\n"
    "RANK and hands out N random bytes (default 128, an ncclUniqueId's size). Prints the\n"
    "payload's FNV-1a 64-bit hash and every rank's host.\n"
    "  --timeout SECONDS  the whole rendezvous's deadline (default 60)\n"
    "  --payload-out FILE write the payload received to FILE\n"
    "  --host-name NAME   this rank's name in the host table (default: the host name)\n"
    "Environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torchrun), or\n"
    "SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST, SLURM_JOB_ID (srun;\n"
    "MASTER_ADDR and MASTER_PORT override the first node and the port 15000 + job id % 10000).\n"
    "SHARD_RENDEZVOUS_PORT overrides the port of either (needed under torchrun when its own\n"
    "store holds MASTER_PORT: TORCHELASTIC_USE_AGENT_STORE=True).\n";

typedef struct tool_options {
  double timeout_s;
  long payload_bytes;
  const char *payload_out, *host_name;
} tool_options;

// 0, or 2 after printing what is wrong.
static int parse(int argc, char **argv, tool_options *t) {
  *t = (tool_options){.timeout_s = 60, .payload_bytes = 128};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = (char *)"";
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(kUsage, stdout);
      exit(0);
    } else if (v && !strcmp(a, "--timeout")) {
      t->timeout_s = strtod(v, &end);
    } else if (v && !strcmp(a, "--payload-bytes")) {
      t->payload_bytes = strtol(v, &end, 10);
    } else if (v && !strcmp(a, "--payload-out")) {
      t->payload_out = v;
    } else if (v && !strcmp(a, "--host-name")) {
      t->host_name = v;
    } else {
      fprintf(stderr, "shard-rendezvous: unknown option or missing value: '%s'\n%s", a, kUsage);
      return 2;
    }
    ++i;
    if (*end || !(t->timeout_s > 0) || t->payload_bytes < 0 ||
        t->payload_bytes > SRT_RENDEZVOUS_MAX_PAYLOAD) {
      fprintf(stderr, "shard-rendezvous: %s '%s': want a timeout > 0 s and a payload of 0..%d "
              "bytes\n", a, v, SRT_RENDEZVOUS_MAX_PAYLOAD);
      return 2;
    }
  }
  return 0;
}

// The launch from the environment: 0, or 2 when there is none to run.
static int read_launch(srt_launch_env *e) {
  srt_status s = srt_launch_env_from_environ(e);
  if (s) {
    fprintf(stderr, "shard-rendezvous: %s\n", srt_status_message(s));
    srt_status_free(s);
    return 2;
  }
  if (e->kind == SRT_LAUNCH_TORCHRUN || e->kind == SRT_LAUNCH_SLURM)
    return 0;
  fprintf(stderr, "shard-rendezvous: %s\n",
          e->kind == SRT_LAUNCH_MPI
              ? "started by an MPI launcher (OMPI_COMM_WORLD_SIZE or PMIX_RANK is set): its "
                "ranks find each other through MPI, not this rendezvous"
              : "no env launch: set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, "
                "or start it with srun");
  return 2;
}

// Rank 0's random payload (/dev/urandom); NULL after printing why not.
static unsigned char *random_payload(size_t n) {
  unsigned char *p = malloc(n ? n : 1);
  FILE *f = fopen("/dev/urandom", "rb");
  if (!p || !f || fread(p, 1, n, f) != n) {
    fprintf(stderr, "shard-rendezvous: cannot read %zu random bytes from /dev/urandom\n", n);
    free(p);
    p = NULL;
  }
  if (f)
    fclose(f);
  return p;
}

static uint64_t fnv1a64(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Prints the result (and writes --payload-out): 0, or 1 if the file failed.
static int report(const srt_launch_env *e, const srt_rendezvous_result *r, const char *out) {
  printf("rank %d of %d (%s launch, local rank %d): rendezvous at %s:%d done",
         e->rank, e->world_size, srt_launch_kind_name(e->kind), e->local_rank,
         e->master_addr, e->master_port);
  if (e->rank > 0)
    printf(", %d connection attempts", r->connect_attempts);
  printf("\npayload %zu bytes fnv1a64 %016llx\n", r->payload_bytes,
         (unsigned long long)fnv1a64(r->payload, r->payload_bytes));
  for (int i = 0; i < r->world_size; ++i)
    printf("host %d: %s\n", i, r->hosts[i]);
  if (!out)
    return 0;
  FILE *f = fopen(out, "wb");
  int ok = f && fwrite(r->payload, 1, r->payload_bytes, f) == r->payload_bytes;
  if (f && fclose(f) != 0)
    ok = 0;
  if (!ok)
    fprintf(stderr, "shard-rendezvous: rank %d cannot write the payload to %s\n", e->rank, out);
  return !ok;
}

int main(int argc, char **argv) {
  tool_options t;
  srt_launch_env e;
  int code = parse(argc, argv, &t);
  if (code || (code = read_launch(&e)))
    return code;
  srt_rendezvous_options o = {.env = e, .timeout_s = t.timeout_s, .host_name = t.host_name};
  unsigned char *payload = NULL;
  if (e.rank == 0) {
    if (!(payload = random_payload((size_t)t.payload_bytes)))
      return 1;
    o.payload = payload, o.payload_bytes = (size_t)t.payload_bytes;
  }
  srt_rendezvous_result r;
  srt_status s = srt_rendezvous(&o, &r);
  free(payload);
  if (s) {
    fprintf(stderr, "shard-rendezvous: %s\n", srt_status_message(s));
    srt_status_free(s);
    return 1;
  }
  code = report(&e, &r, t.payload_out);
  srt_rendezvous_result_free(&r);
  return code;
}
