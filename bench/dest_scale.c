/* dest_scale: the client's CPU per call against the number of destinations
 * of one channel (issue 15, "Scale with the number of destinations").
 *
 *   dest_scale [--dests 3,100,1000] [--lb rr,lcc,bcc,btc] [--calls K]
 *              [--warmup W] [--concurrency C] [--rounds R] [--size B]
 *              [--max-seconds S]
 *
 * For each N of --dests, echo servers (this program again, exec'd with
 * --serve: separate processes, so that their CPU is not the client's)
 * listen on N ports of 127.0.0.1, as few processes as the descriptor limit
 * allows (each needs two per destination: its listener and the accepted
 * connection). Then for each strategy and round, a channel whose target
 * lists all N addresses ("ipv4:127.0.0.1:p1,127.0.0.1:p2,...") on this
 * process's own libuv loop (one thread) runs C calls outstanding, closed
 * loop, of /bench.Echo/Unary with B bytes:
 *
 *   1. connect: until every destination is READY (sluice_channel_get_stats
 *      every 50 ms), with calls running; connection set-up is not measured;
 *   2. warm-up: W more calls (default max(2000, 2N));
 *   3. measured: K calls (default 20000); the process's user + system CPU
 *      (getrusage) and the wall time over them, divided by K.
 *
 * Every phase is bounded by --max-seconds (default 60): past it the run
 * stops and the line says so. The pick time is the channel's own mean
 * decision time (sluice_dest_stats.algo_ns, weighted by calls sent), which
 * includes the two clock reads around the pick.
 *
 * Output (stdout): one line per strategy and N, the median of the rounds
 * (and the range of the CPU per call):
 *   dests lb conc calls cpu_ns/call (min-max) wall_ns/call pick_ns errors
 * Progress on stderr. Exit status 0 when every call succeeded.
 *
 * RLIMIT_NOFILE is raised to its hard limit; with a hard limit of 20,000,
 * 10,000 destinations need two server processes (the client holds 10,000
 * connections). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>
#include <uv.h>

#include "echo.sluice.h"

#define MAX_ROUNDS 15
#define MAX_SERVERS 64
#define FD_RESERVE 256 /* descriptors kept for everything but the sockets */
#define POLL_MS 50

/* ---- the server side (--serve K): K listeners, ports on stdout */

static void unary(sluice_server_call *call, const Bench__EchoMsg *req,
                  void *user_data) {
  (void)user_data;
  bench__echo__unary__reply(call, req);
}

static void raise_nofile(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

static size_t nofile(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
    return 1 << 20;
  return (size_t)r.rlim_cur;
}

/* Listens k times, prints the ports (one line each, then "ready"), serves
 * until stdin reaches its end (the client closed it, or died). */
static int serve(unsigned long k) {
  sluice_server_opts *o = NULL;
  sluice_server *srv = NULL;
  const Bench__Echo_SluiceHandlers h = {.unary = unary};
  int rc;
  if ((rc = sluice_server_opts_new(&o)) != 0 ||
      (rc = sluice_server_opts_set_threads(o, 1)) != 0 ||
      (rc = sluice_server_new(&srv, o)) != 0 ||
      (rc = bench__echo__sluice_register(srv, &h, NULL)) != 0) {
    fprintf(stderr, "dest_scale server: %s\n", sluice_strerror(rc));
    return 1;
  }
  for (unsigned long i = 0; i < k; i++) {
    int port = 0;
    if ((rc = sluice_server_listen(srv, "127.0.0.1:0", &port)) != 0) {
      fprintf(stderr, "dest_scale server: listener %lu of %lu: %s\n", i + 1, k,
              sluice_strerror(rc));
      return 1;
    }
    printf("%d\n", port);
  }
  if ((rc = sluice_server_start(srv)) != 0) {
    fprintf(stderr, "dest_scale server: start: %s\n", sluice_strerror(rc));
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0 || errno == EINTR)
    errno = 0;
  sluice_server_del(srv);
  sluice_server_opts_del(o);
  return 0;
}

/* ---- starting servers from the client */

typedef struct servers {
  pid_t pid[MAX_SERVERS];
  int to[MAX_SERVERS]; /* their stdin: closing it stops them */
  size_t n;
  int *ports;
  size_t n_ports;
} servers;

static void servers_stop(servers *s) {
  for (size_t i = 0; i < s->n; i++) {
    close(s->to[i]);
    int st;
    waitpid(s->pid[i], &st, 0);
  }
  s->n = 0;
  free(s->ports);
  s->ports = NULL;
  s->n_ports = 0;
}

/* Starts servers with n listeners in all. Returns 0 or -1. */
static int servers_start(servers *s, size_t n) {
  memset(s, 0, sizeof *s);
  size_t per = (nofile() - FD_RESERVE) / 2;
  if (per < 1)
    per = 1;
  s->ports = calloc(n, sizeof *s->ports);
  if (!s->ports)
    return -1;
  for (size_t done = 0; done < n;) {
    size_t k = n - done < per ? n - done : per;
    if (s->n == MAX_SERVERS)
      return -1;
    int in[2], out[2];
    /* Close-on-exec: a later server must not hold this one's stdin open
     * (it would never see the end of it). dup2 clears it on 0 and 1. */
    if (pipe(in) != 0 || pipe(out) != 0)
      return -1;
    for (int k = 0; k < 2; k++) {
      fcntl(in[k], F_SETFD, FD_CLOEXEC);
      fcntl(out[k], F_SETFD, FD_CLOEXEC);
    }
    pid_t pid = fork();
    if (pid < 0)
      return -1;
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[0]);
      close(in[1]);
      close(out[0]);
      close(out[1]);
      char arg[32];
      snprintf(arg, sizeof arg, "%zu", k);
      execl("/proc/self/exe", "dest_scale", "--serve", arg, (char *)NULL);
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    s->pid[s->n] = pid;
    s->to[s->n++] = in[1];
    FILE *f = fdopen(out[0], "r");
    char line[64];
    size_t got = 0;
    while (f && fgets(line, sizeof line, f)) {
      if (strncmp(line, "ready", 5) == 0)
        break;
      if (got < k)
        s->ports[done + got++] = atoi(line);
    }
    if (f)
      fclose(f);
    if (got != k) {
      fprintf(stderr, "dest_scale: a server gave %zu of %zu ports\n", got, k);
      return -1;
    }
    done += k;
    s->n_ports = done;
  }
  return 0;
}

/* ---- the client */

enum { CONNECTING, WARMING, MEASURING, DONE };

typedef struct run {
  uv_loop_t *loop;
  uv_timer_t poll;
  sluice_channel *ch;
  Bench__EchoMsg req;
  sluice_call_opts opts;
  size_t n_dests;
  unsigned conc;
  int phase;
  uint64_t phase_end_ns; /* the bound of the current phase */
  uint64_t warm_left;    /* warm-up completions to come */
  uint64_t calls;        /* measured calls */
  uint64_t measured_issued, measured_done;
  unsigned outstanding;
  uint64_t errors;
  int timed_out;
  struct rusage ru0, ru1;
  uint64_t t0, t1;
  char first_error[200];
} run;

static uint64_t rusage_ns(const struct rusage *r) {
  return (uint64_t)r->ru_utime.tv_sec * 1000000000u +
         (uint64_t)r->ru_utime.tv_usec * 1000u +
         (uint64_t)r->ru_stime.tv_sec * 1000000000u +
         (uint64_t)r->ru_stime.tv_usec * 1000u;
}

static void start_call(run *r);

static void finish(run *r) {
  if (r->phase == DONE)
    return;
  r->phase = DONE;
  uv_timer_stop(&r->poll);
}

/* Called with nothing in flight: the measured window holds exactly its
 * calls. */
static void begin_measuring(run *r) {
  r->phase = MEASURING;
  r->phase_end_ns = sluice_now_ns() + (r->phase_end_ns - r->t0);
  getrusage(RUSAGE_SELF, &r->ru0);
  r->t0 = sluice_now_ns();
  for (unsigned i = 0; i < r->conc; i++)
    start_call(r);
}

static void on_reply(const sluice_status *st, const Bench__EchoMsg *resp,
                     void *user_data) {
  run *r = user_data;
  r->outstanding--;
  if (st->code != SLUICE_STATUS_OK || !resp ||
      resp->payload.len != r->req.payload.len) {
    if (r->errors++ == 0)
      snprintf(r->first_error, sizeof r->first_error, "%s: %s",
               sluice_status_name(st->code),
               st->message ? st->message : "wrong payload");
  }
  if (r->phase == WARMING) {
    if (r->warm_left)
      r->warm_left--;
    if (!r->warm_left) { /* let the warm-up calls drain, then measure */
      if (!r->outstanding)
        begin_measuring(r);
      return;
    }
  } else if (r->phase == MEASURING && ++r->measured_done == r->calls) {
    getrusage(RUSAGE_SELF, &r->ru1);
    r->t1 = sluice_now_ns();
    finish(r);
    return;
  }
  start_call(r);
}

static void start_call(run *r) {
  if (r->phase == DONE)
    return;
  if (r->phase == MEASURING && r->measured_issued == r->calls)
    return;
  r->outstanding++;
  if (r->phase == MEASURING)
    r->measured_issued++;
  if (bench__echo__unary__async(r->ch, &r->req, &r->opts, on_reply, r) != 0) {
    r->outstanding--;
    r->errors++;
    finish(r);
  }
}

static void on_poll(uv_timer_t *t) {
  run *r = t->data;
  uint64_t now = sluice_now_ns();
  if (now > r->phase_end_ns) {
    fprintf(stderr, "dest_scale: phase %d over its time bound\n", r->phase);
    r->timed_out = 1;
    finish(r);
    return;
  }
  if (r->phase != CONNECTING)
    return;
  sluice_channel_stats s;
  size_t ready = 0;
  if (sluice_channel_get_stats(r->ch, &s) == 0)
    for (size_t i = 0; i < s.n_dests; i++)
      ready += strcmp(s.dests[i].conn_state, "READY") == 0;
  sluice_channel_stats_clear(&s);
  if (ready == r->n_dests) {
    r->phase = WARMING;
    r->phase_end_ns = now + (r->phase_end_ns - r->t0);
    r->t0 = now;
  }
}

typedef struct result {
  double cpu_ns, wall_ns, pick_ns;
  uint64_t errors;
  int ok;
} result;

static void on_closed(uv_handle_t *h) { (void)h; }

static result run_one(uv_loop_t *loop, const char *target, size_t n_dests,
                      const char *lb, unsigned conc, uint64_t warm,
                      uint64_t calls, size_t size, double max_s) {
  result res = {0, 0, 0, 0, 0};
  static run r;
  memset(&r, 0, sizeof r);
  r.loop = loop;
  r.n_dests = n_dests;
  r.conc = conc;
  uint8_t *payload = calloc(1, size ? size : 1);
  bench__echo_msg__init(&r.req);
  r.req.payload.data = payload;
  r.req.payload.len = size;
  sluice_call_opts_init(&r.opts);
  r.opts.timeout_ms = 10000;
  r.warm_left = warm;
  r.calls = calls;
  sluice_channel_opts *o;
  if (!payload || sluice_channel_opts_new(&o) != 0)
    return res;
  sluice_channel_opts_set_loop(o, loop);
  if (sluice_channel_opts_set_lb(o, lb) != 0 ||
      sluice_channel_new(&r.ch, target, o) != 0) {
    fprintf(stderr, "dest_scale: cannot make a channel with lb %s\n", lb);
    sluice_channel_opts_del(o);
    free(payload);
    return res;
  }
  sluice_channel_opts_del(o);
  r.t0 = sluice_now_ns();
  r.phase = CONNECTING;
  r.phase_end_ns = r.t0 + (uint64_t)(max_s * 1e9);
  uv_timer_init(loop, &r.poll);
  r.poll.data = &r;
  uv_timer_start(&r.poll, on_poll, POLL_MS, POLL_MS);
  for (unsigned i = 0; i < conc; i++)
    start_call(&r);
  while (r.phase != DONE && uv_run(loop, UV_RUN_ONCE))
    ;
  /* What is still in flight (a timed-out run) ends with the channel. */
  sluice_channel_stats s;
  if (sluice_channel_get_stats(r.ch, &s) == 0) {
    double sum = 0, w = 0;
    for (size_t i = 0; i < s.n_dests; i++) {
      sum += s.dests[i].algo_ns * (double)s.dests[i].sent;
      w += (double)s.dests[i].sent;
    }
    res.pick_ns = w > 0 ? sum / w : 0;
  }
  sluice_channel_stats_clear(&s);
  sluice_channel_del(r.ch);
  uv_close((uv_handle_t *)&r.poll, on_closed);
  while (r.outstanding && uv_run(loop, UV_RUN_ONCE))
    ;
  uv_run(loop, UV_RUN_NOWAIT);
  free(payload);
  res.errors = r.errors;
  if (r.errors)
    fprintf(stderr, "dest_scale: %llu errors; first: %s\n",
            (unsigned long long)r.errors, r.first_error);
  if (!r.timed_out && r.t1) {
    res.cpu_ns = (double)(rusage_ns(&r.ru1) - rusage_ns(&r.ru0)) / calls;
    res.wall_ns = (double)(r.t1 - r.t0) / calls;
    res.ok = 1;
  }
  return res;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n ? v[n / 2] : 0;
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [--dests 3,100,1000] [--lb rr,lcc,bcc,btc] [--calls K]\n"
          "          [--warmup W] [--concurrency C] [--rounds R] [--size B]\n"
          "          [--max-seconds S]\n"
          "  --dests LIST     destination counts (default 3,100,1000)\n"
          "  --lb LIST        strategies (default rr,lcc,bcc,btc)\n"
          "  --calls K        measured calls per run (default 20000)\n"
          "  --warmup W       calls after every destination is READY "
          "(default max(2000, 2N))\n"
          "  --concurrency C  calls outstanding (default 1)\n"
          "  --rounds R       runs per strategy and N, median reported "
          "(default 3)\n"
          "  --size B         payload bytes (default 16)\n"
          "  --max-seconds S  bound of each phase of a run (default 60)\n",
          prog);
}

static int parse_ul(const char *s, unsigned long lo, unsigned long hi,
                    unsigned long *out) {
  char *end;
  if (!s || !*s)
    return -1;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (*end || errno || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
    unsigned long k;
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    if (parse_ul(argv[2], 1, 60000, &k) != 0)
      return 2;
    return serve(k);
  }
  char dests_buf[256] = "3,100,1000", lbs_buf[64] = "rr,lcc,bcc,btc";
  unsigned long calls = 20000, warm = 0, conc = 1, rounds = 3, size = 16,
                max_s = 60;
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    const char *val = i + 1 < argc ? argv[++i] : NULL;
    int bad = 0;
    if (strcmp(flag, "--dests") == 0)
      bad = !val || snprintf(dests_buf, sizeof dests_buf, "%s", val) >=
                        (int)sizeof dests_buf;
    else if (strcmp(flag, "--lb") == 0)
      bad = !val ||
            snprintf(lbs_buf, sizeof lbs_buf, "%s", val) >= (int)sizeof lbs_buf;
    else if (strcmp(flag, "--calls") == 0)
      bad = parse_ul(val, 1, 100000000, &calls);
    else if (strcmp(flag, "--warmup") == 0)
      bad = parse_ul(val, 0, 100000000, &warm);
    else if (strcmp(flag, "--concurrency") == 0)
      bad = parse_ul(val, 1, 10000, &conc);
    else if (strcmp(flag, "--rounds") == 0)
      bad = parse_ul(val, 1, MAX_ROUNDS, &rounds);
    else if (strcmp(flag, "--size") == 0)
      bad = parse_ul(val, 0, 1 << 20, &size);
    else if (strcmp(flag, "--max-seconds") == 0)
      bad = parse_ul(val, 1, 3600, &max_s);
    else {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "%s: %s needs a valid value\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
  }
  raise_nofile();
  signal(SIGPIPE, SIG_IGN);
  uv_loop_t loop;
  uv_loop_init(&loop);
  int failed = 0;
  printf("%6s %4s %4s %7s %22s %12s %8s %6s\n", "dests", "lb", "conc", "calls",
         "cpu_ns/call (min-max)", "wall_ns/call", "pick_ns", "errors");
  fflush(stdout);
  for (char *save = NULL, *tok = strtok_r(dests_buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    unsigned long n;
    if (parse_ul(tok, 1, 60000, &n) != 0) {
      fprintf(stderr, "%s: bad destination count '%s'\n", prog, tok);
      return 2;
    }
    if (n + FD_RESERVE > nofile()) {
      fprintf(stderr,
              "%s: %lu destinations need %lu descriptors; the limit "
              "is %zu\n",
              prog, n, n + FD_RESERVE, nofile());
      failed = 1;
      continue;
    }
    fprintf(stderr, "dest_scale: %lu destinations: starting servers\n", n);
    servers sv;
    if (servers_start(&sv, n) != 0) {
      fprintf(stderr, "%s: cannot start servers for %lu destinations\n", prog,
              n);
      servers_stop(&sv);
      failed = 1;
      continue;
    }
    size_t cap = 8 + n * 24;
    char *target = malloc(cap);
    if (!target)
      return 1;
    size_t len = (size_t)snprintf(target, cap, "ipv4:");
    for (size_t i = 0; i < n; i++)
      len += (size_t)snprintf(target + len, cap - len, "%s127.0.0.1:%d",
                              i ? "," : "", sv.ports[i]);
    uint64_t w = warm ? warm : (n * 2 > 2000 ? n * 2 : 2000);
    char lbs[64];
    snprintf(lbs, sizeof lbs, "%s", lbs_buf);
    for (char *s2 = NULL, *lb = strtok_r(lbs, ",", &s2); lb;
         lb = strtok_r(NULL, ",", &s2)) {
      double cpu[MAX_ROUNDS], wall[MAX_ROUNDS], pick[MAX_ROUNDS];
      size_t ok = 0;
      uint64_t errors = 0;
      for (unsigned long k = 0; k < rounds; k++) {
        fprintf(stderr, "dest_scale: %lu destinations, %s, round %lu/%lu\n", n,
                lb, k + 1, rounds);
        result res = run_one(&loop, target, n, lb, (unsigned)conc, w, calls,
                             size, (double)max_s);
        errors += res.errors;
        if (!res.ok)
          continue;
        cpu[ok] = res.cpu_ns;
        wall[ok] = res.wall_ns;
        pick[ok++] = res.pick_ns;
        fprintf(stderr,
                "dest_scale:   %.0f ns CPU per call, %.0f ns wall, "
                "pick %.1f ns\n",
                res.cpu_ns, res.wall_ns, res.pick_ns);
      }
      if (!ok) {
        printf("%6lu %4s %4lu %7lu %22s %12s %8s %6llu\n", n, lb, conc, calls,
               "failed", "-", "-", (unsigned long long)errors);
        failed = 1;
        continue;
      }
      double lo = cpu[0], hi = cpu[0];
      for (size_t i = 1; i < ok; i++) {
        lo = cpu[i] < lo ? cpu[i] : lo;
        hi = cpu[i] > hi ? cpu[i] : hi;
      }
      char range[64];
      snprintf(range, sizeof range, "%.0f (%.0f-%.0f)", median(cpu, ok), lo,
               hi);
      printf("%6lu %4s %4lu %7lu %22s %12.0f %8.1f %6llu\n", n, lb, conc, calls,
             range, median(wall, ok), median(pick, ok),
             (unsigned long long)errors);
      fflush(stdout);
      failed |= errors != 0;
    }
    free(target);
    servers_stop(&sv);
  }
  uv_loop_close(&loop);
  return failed;
}
