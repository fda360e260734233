/* soak_driver: the soak and chaos test (docs/soak.md).
 *
 *   soak_driver --server PATH [--seconds N] [--workers N] [--inflight N]
 *               [--chaos-ms MIN,MAX] [--seed N] [--progress-s N]
 *               [--certs-script scripts/gen-test-certs.sh]
 *
 * Starts four soak_server processes (three on loopback TCP ports, one on a
 * Unix socket), opens four channels over them (several addresses and the
 * load balancer, round robin with gzip and keepalive, a Unix socket, one
 * address with a wait queue; with --certs-script a fifth server and
 * channel speak TLS, with certificates that script makes), and for N
 * seconds (--seconds, else SOAK_SECONDS, else 30) runs worker threads
 * that issue a random mix of
 * calls: unary (async, blocking), server-, client- and bidi-streaming
 * (the client sending from its own thread or ping-pong from the
 * callbacks), some with a retry or hedging policy or wait-for-ready,
 * random deadlines from 1 ms to none, random metadata (echoed and
 * checked), compression both ways, large payloads, client cancels at
 * random points, and server handlers that fail, stall or answer from
 * another thread (soak.proto). A chaos thread
 * meanwhile kills a server (SIGKILL) and restarts it on the same address,
 * pauses one (SIGSTOP, SIGCONT), and drops connections: the server's
 * (it shuts its sockets down, soak_server.c) or the driver's own
 * (shutdown(2) of the sockets to a server).
 *
 * Fails (exit 1) unless, at the end:
 *  - every call started got exactly one completion (per call id), every
 *    OK answer was what the request asked for (ids, sequence numbers,
 *    sizes, echoed metadata);
 *  - OK calls, deadlines, client cancels, UNAVAILABLE and the server's
 *    asked-for failures all happened, and each kind of chaos did;
 *  - after the channels are destroyed and the servers stopped, the
 *    process has as many threads and descriptors as before the run;
 *  - every server stopped normally exited 0 (its own accounting, and
 *    LeakSanitizer in a sanitizer build);
 *  - the live heap (and the RSS) did not grow over the second half of
 *    the run beyond a generous bound (see check_memory()).
 * Progress goes to stderr every few seconds. */
#define _GNU_SOURCE /* pipe2, mallinfo2 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

#include "soak.sluice.h"
#include "soak_util.h"

extern char **environ;

/* The live heap as the sanitizers' allocators count it (not their
 * quarantine or caches); absent in a plain build, where mallinfo2() is
 * used. */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

/* Under TSan the RSS is mostly TSan's own shadow memory and internal
 * allocations, which keep growing over a long run (about 0.4 MiB a second
 * in this test, 110 MiB after 1 s and 346 MiB after 600 s, while the live
 * heap stays at 16-17 MiB; docs/soak.md): there it is reported, not
 * judged. */
#if defined(__SANITIZE_THREAD__)
#define SOAK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SOAK_TSAN 1
#endif
#endif
#ifndef SOAK_TSAN
#define SOAK_TSAN 0
#endif

#define N_SERVERS 5 /* the fifth (TLS) only with --certs-script */
#define N_CHANNELS 5
#define UNIX_SERVER 3
#define TLS_SERVER 4
#define MAX_WORKERS 16
#define MAX_CANCELS 64     /* pending cancels per worker */
#define DRAIN_MS 60000u    /* after the run: wait for the calls in flight */
#define STOP_MS 30000u     /* a server's graceful exit */
#define READY_MS 30000u    /* a server's start (a loaded box, ASan) */
#define RESPAWN_TRIES 100u /* 100 ms apart: the port may be held briefly */
#define MAX_REPLY (256u * 1024u)

enum { M_UNARY, M_SSTREAM, M_CSTREAM, M_BIDI, M_COUNT };
enum { CH_KILL, CH_PAUSE, CH_DROP_SRV, CH_DROP_CLI, CH_KINDS };
static const char *const chaos_names[CH_KINDS] = {"kill", "pause", "drop-srv",
                                                  "drop-cli"};
/* What the servers are asked to fail with (none that outlier ejection
 * counts, so the balancing is not skewed on purpose). */
static const sluice_status_code fail_codes[] = {
    SLUICE_STATUS_NOT_FOUND,         SLUICE_STATUS_ALREADY_EXISTS,
    SLUICE_STATUS_PERMISSION_DENIED, SLUICE_STATUS_FAILED_PRECONDITION,
    SLUICE_STATUS_ABORTED,           SLUICE_STATUS_OUT_OF_RANGE};
#define N_FAIL_CODES (sizeof fail_codes / sizeof fail_codes[0])

/* ---- settings */

static const char *server_path, *certs_script;
static unsigned n_servers = N_SERVERS - 1, n_channels = N_CHANNELS - 1;
static unsigned run_seconds = 30, n_workers = 3, max_inflight = 48;
static unsigned chaos_min_ms = 300, chaos_max_ms = 1500, progress_s = 5;
static uint64_t seed;

/* ---- accounting */

static uint8_t *ledger; /* per call id: 1 started, 2 completed, >2 doubled */
static uint64_t ledger_cap;
static atomic_uint_fast64_t next_id = 1;
static atomic_uint_fast64_t n_started, n_completed, n_start_failed;
static atomic_uint_fast64_t n_doubled, n_wrong, n_unknown_id;
static atomic_uint_fast64_t by_code[17], by_kind_code[M_COUNT][17];
static atomic_uint_fast64_t by_kind[M_COUNT], n_blocking, n_retry_policy;
static atomic_uint_fast64_t n_hedging_policy, n_wait_for_ready;
static atomic_uint_fast64_t n_asked_fail, n_cancel_sched, n_cancel_in_cb;
static atomic_uint_fast64_t n_chaos[CH_KINDS], n_cli_sockets_dropped;
static atomic_uint_fast64_t n_server_deaths; /* not by our hand */
static atomic_int fatal;                     /* the run cannot go on */
static atomic_int stop_issuing;

static pthread_mutex_t msg_mu = PTHREAD_MUTEX_INITIALIZER;
static char first_msg[17][160]; /* the first message seen per code */
static atomic_int have_msg[17];
static unsigned wrong_printed;

static pthread_mutex_t fl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fl_cv;
static unsigned inflight;

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static uint32_t rnd_in(uint64_t *s, uint32_t lo, uint32_t hi) {
  return lo + (uint32_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

static int chance(uint64_t *s, unsigned percent) {
  return rnd(s) % 100 < percent;
}

static const char *const kind_names[M_COUNT] = {"unary", "server-stream",
                                                "client-stream", "bidi"};

static void wrong(uint64_t id, int kind, const char *what) {
  atomic_fetch_add(&n_wrong, 1);
  pthread_mutex_lock(&msg_mu);
  if (wrong_printed++ < 20)
    fprintf(stderr, "soak: call %" PRIu64 " (%s): %s\n", id, kind_names[kind],
            what);
  pthread_mutex_unlock(&msg_mu);
}

static uint8_t pattern(size_t i) { return (uint8_t)(i * 131u + 17u); }

static int payload_ok(const ProtobufCBinaryData *p, uint32_t want) {
  if (p->len != want)
    return 0;
  size_t probe[3] = {0, p->len / 2, p->len - 1};
  for (int k = 0; k < 3 && p->len; k++)
    if (p->data[probe[k]] != pattern(probe[k]))
      return 0;
  return 1;
}

/* What the descriptors are, when their count is off. */
static void dump_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
      continue;
    char path[300], link[256];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, link, sizeof link - 1);
    link[n > 0 ? n : 0] = 0;
    fprintf(stderr, "soak:   fd %s -> %s\n", e->d_name, link);
  }
  closedir(d);
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (!f)
    return -1;
  if (fscanf(f, "%ld %ld", &size, &res) != 2)
    res = -1;
  fclose(f);
  return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

static long heap_kib(void) {
  if (__sanitizer_get_current_allocated_bytes)
    return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
  struct mallinfo2 mi = mallinfo2();
  return (long)((mi.uordblks + mi.hblkhd) / 1024);
}

/* ---- servers */

typedef struct server {
  char addr[160]; /* "127.0.0.1:PORT" or "unix:/path" */
  int port;       /* 0 for unix */
  const char *max_age;
  int tls; /* serves TLS (sock_dir's server.pem) */
  pid_t pid;
  int to; /* its stdin */
  int paused;
  unsigned starts;
} server;

static server servers[N_SERVERS];
static char sock_dir[64];     /* the Unix socket, the certificates */
static char cert_path[3][96]; /* ca.pem, server.pem, server.key */

/* Starts s at s->addr; waits for "ready". 0, -2 when it could not listen
 * there (try again or elsewhere), -1 on any other failure. */
static int spawn_server(server *s) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0)
    return -1;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  char *const argv[] = {(char *)"soak_server", s->addr,
                        (char *)s->max_age,    s->tls ? cert_path[1] : NULL,
                        cert_path[2],          NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, server_path, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    fprintf(stderr, "soak: cannot start %s: %s\n", server_path, strerror(rc));
    close(in[1]);
    close(out[0]);
    return -1;
  }
  char buf[16];
  size_t got = 0;
  uint64_t until = soak_now_ms() + READY_MS;
  while (got < 6 && soak_now_ms() < until) {
    struct pollfd p = {out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0)
      continue;
    ssize_t n = read(out[0], buf + got, sizeof buf - 1 - got);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(out[0]);
  if (got >= 6 && memcmp(buf, "ready\n", 6) == 0) {
    s->pid = pid;
    s->to = in[1];
    s->paused = 0;
    s->starts++;
    return 0;
  }
  close(in[1]);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
    return -2;
  fprintf(stderr, "soak: server %s did not start (status 0x%x)\n", s->addr, st);
  return -1;
}

/* The same address again, as after a crash: the port may still be held
 * for a moment (a client's connect racing for it, TIME_WAIT). */
static int respawn(server *s) {
  for (unsigned i = 0; i < RESPAWN_TRIES; i++) {
    int rc = spawn_server(s);
    if (rc != -2)
      return rc;
    soak_sleep_ms(100);
  }
  fprintf(stderr, "soak: cannot listen on %s again\n", s->addr);
  return -1;
}

/* A free port outside the usual ephemeral range (32768-60999), so that a
 * client's outgoing connection cannot take a dead server's port while it
 * is down. */
static int first_start(server *s, uint64_t *rs, int index) {
  for (int i = 0; i < 200; i++) {
    if (s->port || index == UNIX_SERVER) {
      int rc = spawn_server(s);
      if (rc != -2)
        return rc;
      if (!s->port)
        return -1;
    }
    s->port = (int)rnd_in(rs, 20000, 30000);
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
  }
  return -1;
}

static void reap_unexpected(void) {
  for (unsigned i = 0; i < n_servers; i++) {
    server *s = &servers[i];
    int st = 0;
    if (s->pid <= 0 || waitpid(s->pid, &st, WNOHANG) != s->pid)
      continue;
    atomic_fetch_add(&n_server_deaths, 1);
    fprintf(stderr, "soak: server %s died (status 0x%x): restarting\n", s->addr,
            st);
    close(s->to);
    s->pid = 0;
    if (respawn(s) != 0)
      atomic_store(&fatal, 1);
  }
}

/* 0, or -1 when it did not exit 0 (or had to be killed). */
static int stop_server(server *s) {
  if (s->pid <= 0)
    return -1;
  kill(s->pid, SIGCONT);
  close(s->to);
  int st = 0;
  uint64_t until = soak_now_ms() + STOP_MS;
  while (soak_now_ms() < until) {
    pid_t r = waitpid(s->pid, &st, WNOHANG);
    if (r == s->pid) {
      s->pid = 0;
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
      fprintf(stderr, "soak: server %s ended with status 0x%x\n", s->addr, st);
      return -1;
    }
    soak_sleep_ms(20);
  }
  fprintf(stderr, "soak: server %s did not stop in %u ms: killed\n", s->addr,
          STOP_MS);
  kill(s->pid, SIGKILL);
  waitpid(s->pid, &st, 0);
  s->pid = 0;
  return -1;
}

/* ---- channels */

static sluice_channel *channels[N_CHANNELS];
static const char *const channel_desc[N_CHANNELS] = {
    "3 addrs btc", "2 addrs rr gzip keepalive", "unix lcc",
    "1 addr bcc wait-queue keepalive", "TLS btc"};

static int make_channels(void) {
  char target[N_CHANNELS][600];
  snprintf(target[0], sizeof target[0], "ipv4:%s,%s,%s", servers[0].addr,
           servers[1].addr, servers[2].addr);
  snprintf(target[1], sizeof target[1], "ipv4:%s,%s", servers[1].addr,
           servers[2].addr);
  snprintf(target[2], sizeof target[2], "%s", servers[3].addr);
  snprintf(target[3], sizeof target[3], "ipv4:%s", servers[0].addr);
  snprintf(target[4], sizeof target[4], "ipv4:%s", servers[TLS_SERVER].addr);
  for (unsigned i = 0; i < n_channels; i++) {
    sluice_channel_opts *o;
    if (sluice_channel_opts_new(&o) != 0)
      return -1;
    sluice_channel_opts_set_backoff_ms(o, 50, 500);
    sluice_channel_opts_set_connect_timeout_ms(o, 2000);
    static const char *const lb[N_CHANNELS] = {"btc", "rr", "lcc", "bcc",
                                               "btc"};
    sluice_channel_opts_set_lb(o, lb[i]);
    if (i == 1 || i == 3)
      sluice_channel_opts_set_keepalive(o, 1000, 1000, 0);
    if (i == 3)
      sluice_channel_opts_set_wait_queue(o, 16, 50);
    if (i == TLS_SERVER) { /* the server's certificate names 127.0.0.1 */
      sluice_tls_client_config tc;
      sluice_tls_client_config_init(&tc);
      tc.ca.file = cert_path[0];
      if (sluice_channel_opts_set_tls(o, &tc) != 0) {
        fprintf(stderr, "soak: TLS: %s\n", sluice_channel_opts_last_error(o));
        sluice_channel_opts_del(o);
        return -1;
      }
    }
    int rc = sluice_channel_new(&channels[i], target[i], o);
    sluice_channel_opts_del(o);
    if (rc != 0) {
      fprintf(stderr, "soak: channel %s: %s\n", target[i], sluice_strerror(rc));
      return -1;
    }
  }
  return 0;
}

/* ---- calls */

typedef struct ccall {
  atomic_int refs; /* the worker's and on_done's */
  uint64_t id;
  int kind;
  uint32_t reply_size, count, n_msgs, fail_code;
  int echo_md, pingpong, cancel_after; /* cancel_after: in on_message */
  atomic_uint sent;                    /* requests queued */
  uint32_t got;                        /* responses (loop thread) */
  int closed;                          /* pingpong: close_send done */
} ccall;

static void ccall_unref(ccall *c) {
  if (atomic_fetch_sub(&c->refs, 1) == 1)
    free(c);
}

static void fl_release(void) {
  pthread_mutex_lock(&fl_mu);
  inflight--;
  pthread_cond_broadcast(&fl_cv);
  pthread_mutex_unlock(&fl_mu);
}

static void note_status(uint64_t id, int kind, sluice_status_code code,
                        const char *msg) {
  uint8_t prev = __atomic_fetch_add(&ledger[id], 1, __ATOMIC_ACQ_REL);
  if (prev != 1) {
    atomic_fetch_add(prev == 0 ? &n_unknown_id : &n_doubled, 1);
    fprintf(stderr, "soak: call %" PRIu64 " completed %s\n", id,
            prev == 0 ? "without being started" : "twice");
  }
  atomic_fetch_add(&n_completed, 1);
  unsigned c = (unsigned)code < 17 ? (unsigned)code : 2;
  atomic_fetch_add(&by_code[c], 1);
  atomic_fetch_add(&by_kind_code[kind][c], 1);
  if (!atomic_load(&have_msg[c])) {
    pthread_mutex_lock(&msg_mu);
    if (!first_msg[c][0])
      snprintf(first_msg[c], sizeof first_msg[c], "%s",
               msg && msg[0] ? msg : "(no message)");
    atomic_store(&have_msg[c], 1);
    pthread_mutex_unlock(&msg_mu);
  }
}

static void send_req(sluice_call *call, ccall *c, uint32_t seq);

static void on_message(sluice_call *call, const ProtobufCMessage *msg,
                       void *ud) {
  ccall *c = ud;
  const Soak__Resp *r = (const Soak__Resp *)msg;
  uint32_t n = c->got++;
  uint64_t want_id = c->id;
  if (c->kind == M_CSTREAM && atomic_load(&c->sent) == 0)
    want_id = 0; /* no request: the server knows no id */
  char why[128];
  why[0] = 0;
  if (r->id != want_id)
    snprintf(why, sizeof why, "response of call %" PRIu64, (uint64_t)r->id);
  else if (!payload_ok(&r->payload, want_id ? c->reply_size : 0))
    snprintf(why, sizeof why, "payload of %zu bytes, asked %u (or corrupt)",
             r->payload.len, c->reply_size);
  else if ((c->kind == M_SSTREAM || c->kind == M_BIDI) && r->seq != n)
    snprintf(why, sizeof why, "response seq %u, expected %u", r->seq, n);
  else if (c->kind == M_CSTREAM && r->seq != atomic_load(&c->sent))
    snprintf(why, sizeof why, "server counted %u requests, sent %u", r->seq,
             atomic_load(&c->sent));
  if (why[0])
    wrong(c->id, c->kind, why);
  if (c->cancel_after && c->got == (uint32_t)c->cancel_after) {
    atomic_fetch_add(&n_cancel_in_cb, 1);
    sluice_call_cancel(call, "soak: cancelled in on_message");
    return;
  }
  if (c->pingpong && !c->closed) {
    uint32_t s = atomic_load(&c->sent);
    if (s < c->n_msgs) {
      send_req(call, c, s);
    } else {
      c->closed = 1;
      sluice_call_close_send(call);
    }
  }
}

static void on_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  ccall *c = ud;
  note_status(c->id, c->kind, st->code, st->message);
  if (st->code == SLUICE_STATUS_OK) {
    uint32_t sent = atomic_load(&c->sent);
    uint32_t want = 0;
    int should_fail = 0;
    switch (c->kind) {
    case M_UNARY:
      want = 1;
      should_fail = c->fail_code != 0;
      break;
    case M_SSTREAM:
      want = c->count;
      should_fail = c->fail_code != 0;
      break;
    case M_CSTREAM:
      want = 1;
      should_fail = c->fail_code != 0 && sent > 0;
      break;
    default:
      want = sent;
      should_fail = c->fail_code != 0 && sent >= c->count;
      break;
    }
    char why[128];
    why[0] = 0;
    if (should_fail)
      snprintf(why, sizeof why, "OK, but the server was asked to fail");
    else if (c->got != want)
      snprintf(why, sizeof why,
               "OK with %u responses, expected %u (sent %u of %u%s, "
               "reply %u bytes, cancel after %d)",
               c->got, want, sent, c->n_msgs, c->pingpong ? " ping-pong" : "",
               c->reply_size, c->cancel_after);
    if (!why[0] && c->echo_md && (c->kind < M_CSTREAM || sent > 0)) {
      char idtxt[32];
      snprintf(idtxt, sizeof idtxt, "%" PRIu64, c->id);
      const char *v = sluice_metadata_find(st->trailing_md, "soak-id", NULL);
      if (!v || strcmp(v, idtxt) != 0)
        snprintf(why, sizeof why, "trailer soak-id %s", v ? v : "(none)");
    }
    if (why[0])
      wrong(c->id, c->kind, why);
  } else if (c->fail_code && st->code == (sluice_status_code)c->fail_code) {
    atomic_fetch_add(&n_asked_fail, 1);
  }
  fl_release();
  ccall_unref(c);
}

static const sluice_call_handlers call_handlers = {NULL, on_message, NULL,
                                                   on_done};

static uint8_t req_payload[64 * 1024];

static void req_fill(Soak__Req *r, const ccall *c, uint32_t seq,
                     uint32_t payload_len, int compress, uint32_t stall,
                     int from_thread) {
  soak__req__init(r);
  r->id = c->id;
  r->seq = seq;
  r->fail_code = c->fail_code;
  r->stall_ms = stall;
  r->from_thread = from_thread;
  r->reply_size = c->reply_size;
  r->count = c->count;
  r->echo_md = c->echo_md;
  r->compress = compress;
  r->payload.data = req_payload;
  r->payload.len = payload_len;
}

/* A later request of a streaming call (the first carries the behaviour:
 * later ones repeat it, the server reads only the first). */
static void send_req(sluice_call *call, ccall *c, uint32_t seq) {
  Soak__Req r;
  req_fill(&r, c, seq, 16 + seq, 0, 0, 0);
  atomic_fetch_add(&c->sent, 1);
  if (sluice_call_send(call, &r.base) != 0)
    atomic_fetch_sub(&c->sent, 1);
}

static uint32_t pick_size(uint64_t *rs, int big_ok) {
  unsigned p = (unsigned)(rnd(rs) % 100);
  if (p < 60)
    return rnd_in(rs, 0, 256);
  if (p < 90 || !big_ok)
    return rnd_in(rs, 257, 8192);
  if (p < 98)
    return rnd_in(rs, 8193, 65536);
  return rnd_in(rs, 65537, MAX_REPLY);
}

static uint64_t pick_timeout_ms(uint64_t *rs) {
  unsigned p = (unsigned)(rnd(rs) % 100);
  if (p < 12)
    return 1;
  if (p < 27)
    return rnd_in(rs, 2, 20);
  if (p < 47)
    return rnd_in(rs, 21, 200);
  if (p < 67)
    return rnd_in(rs, 201, 2000);
  if (p < 82)
    return rnd_in(rs, 2001, 10000);
  return 0; /* none */
}

typedef struct pending_cancel {
  sluice_call *call;
  ccall *c;
  uint64_t at_ms;
} pending_cancel;

typedef struct worker {
  pthread_t tid;
  uint64_t rs;
  pending_cancel cancels[MAX_CANCELS];
  unsigned n_cancels;
} worker;

static void run_cancels(worker *w, int all) {
  uint64_t now = soak_now_ms();
  for (unsigned i = 0; i < w->n_cancels;) {
    pending_cancel *p = &w->cancels[i];
    if (!all && p->at_ms > now) {
      i++;
      continue;
    }
    sluice_call_cancel(p->call, "soak: cancelled by the client");
    sluice_call_release(p->call);
    ccall_unref(p->c);
    *p = w->cancels[--w->n_cancels];
  }
}

static uint64_t new_id(void) {
  uint64_t id = atomic_fetch_add(&next_id, 1);
  if (id >= ledger_cap) {
    atomic_store(&stop_issuing, 1);
    return 0;
  }
  return id;
}

static sluice_metadata *make_md(uint64_t *rs, uint64_t id) {
  sluice_metadata *md;
  if (sluice_metadata_new(&md) != 0)
    return NULL;
  char v[96];
  snprintf(v, sizeof v, "%" PRIu64, id);
  sluice_metadata_add_str(md, "soak-id", v);
  unsigned n = rnd_in(rs, 0, 3);
  for (unsigned i = 0; i < n; i++) {
    uint32_t len = rnd_in(rs, 0, sizeof v - 1);
    if (chance(rs, 50)) {
      for (uint32_t k = 0; k < len; k++)
        v[k] = (char)rnd_in(rs, 0x20, 0x7e);
      v[len] = 0;
      sluice_metadata_add_str(md, "soak-text", v);
    } else {
      for (uint32_t k = 0; k < len; k++)
        v[k] = (char)rnd(rs);
      sluice_metadata_add(md, "soak-data-bin", v, len);
    }
  }
  return md;
}

/* One unary call on the worker's thread (blocking), with a deadline (a
 * blocking call without one could hold the worker past the end). */
static void blocking_call(worker *w, sluice_channel *ch, ccall *c,
                          uint32_t stall, int from_thread) {
  Soak__Req r;
  req_fill(&r, c, 0, pick_size(&w->rs, 0), 0, stall, from_thread);
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.timeout_ms = rnd_in(&w->rs, 1, 5000);
  ProtobufCMessage *resp = NULL;
  sluice_status st;
  sluice_status_init(&st);
  atomic_fetch_add(&n_blocking, 1);
  sluice_status_code code = sluice_unary_call_blocking(
      ch, &soak__soak__sluice_methods[M_UNARY], &r.base, &resp, &o, &st);
  note_status(c->id, M_UNARY, code, st.message);
  if (code == SLUICE_STATUS_OK) {
    const Soak__Resp *rr = (const Soak__Resp *)resp;
    if (c->fail_code)
      wrong(c->id, M_UNARY, "blocking: OK, but the server was asked to fail");
    else if (!resp || rr->id != c->id ||
             !payload_ok(&rr->payload, c->reply_size))
      wrong(c->id, M_UNARY, "blocking: wrong response");
  } else if (c->fail_code && code == (sluice_status_code)c->fail_code) {
    atomic_fetch_add(&n_asked_fail, 1);
  }
  if (resp)
    protobuf_c_message_free_unpacked(resp, NULL);
  sluice_status_clear(&st);
}

static void issue(worker *w) {
  uint64_t *rs = &w->rs;
  uint64_t id = new_id();
  if (!id)
    return;
  int chi = (int)(rnd(rs) % n_channels);
  sluice_channel *ch = channels[chi];
  unsigned p = (unsigned)(rnd(rs) % 100);
  int kind = p < 40   ? M_UNARY
             : p < 60 ? M_SSTREAM
             : p < 80 ? M_CSTREAM
                      : M_BIDI;

  ccall *c = calloc(1, sizeof *c);
  if (!c) {
    atomic_store(&fatal, 1);
    return;
  }
  atomic_init(&c->refs, 2);
  c->id = id;
  c->kind = kind;
  c->fail_code = chance(rs, 10) ? fail_codes[rnd(rs) % N_FAIL_CODES] : 0;
  c->echo_md = chance(rs, 30);
  c->reply_size = pick_size(rs, kind == M_UNARY);
  c->count = kind == M_SSTREAM ? rnd_in(rs, 0, c->reply_size > 8192 ? 4 : 16)
                               : rnd_in(rs, 1, 8);
  c->n_msgs = kind >= M_CSTREAM ? rnd_in(rs, 0, 8) : 1;
  c->pingpong = kind == M_BIDI && chance(rs, 50);
  uint32_t stall = chance(rs, 15)  ? rnd_in(rs, 1, 300)
                   : chance(rs, 3) ? rnd_in(rs, 301, 2000)
                                   : 0;
  int from_thread = chance(rs, 25);
  int compress_resp = chance(rs, 15);
  atomic_fetch_add(&by_kind[kind], 1);

  __atomic_store_n(&ledger[id], 1, __ATOMIC_RELEASE);
  atomic_fetch_add(&n_started, 1);

  if (kind == M_UNARY && chance(rs, 5)) {
    blocking_call(w, ch, c, stall, from_thread);
    free(c);
    fl_release();
    return;
  }

  sluice_call_opts o;
  sluice_call_opts_init(&o);
  o.timeout_ms = pick_timeout_ms(rs);
  if (chi == 1 || chance(rs, 10))
    o.compression = SLUICE_COMPRESS_GZIP;
  sluice_metadata *md = c->echo_md || chance(rs, 30) ? make_md(rs, id) : NULL;
  o.metadata = md;
  sluice_retry_policy retry = {3, 10, 100, 2.0,
                               SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE)};
  sluice_hedging_policy hedge = {3, rnd_in(rs, 0, 20),
                                 SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE)};
  unsigned pol = (unsigned)(rnd(rs) % 100);
  if (kind <= M_SSTREAM && pol < 10) {
    o.retry_policy = &retry;
    atomic_fetch_add(&n_retry_policy, 1);
  } else if (kind <= M_SSTREAM && pol < 15) {
    o.hedging_policy = &hedge;
    atomic_fetch_add(&n_hedging_policy, 1);
  }
  if (chance(rs, 5)) {
    o.wait_for_ready = 1;
    atomic_fetch_add(&n_wait_for_ready, 1);
  }
  if (kind != M_UNARY && chance(rs, 5))
    c->cancel_after = (int)rnd_in(rs, 1, 3);

  Soak__Req first;
  req_fill(&first, c, 0, pick_size(rs, 0), compress_resp, stall, from_thread);
  sluice_call *call = NULL;
  int rc;
  if (kind == M_UNARY || kind == M_SSTREAM)
    rc = sluice_call_start_msg(ch, &soak__soak__sluice_methods[kind],
                               &first.base, &o, &call_handlers, c, &call);
  else
    rc = sluice_call_start(ch, &soak__soak__sluice_methods[kind], &o,
                           &call_handlers, c, &call);
  sluice_metadata_del(md);
  if (rc != 0) {
    fprintf(stderr, "soak: start: %s\n", sluice_strerror(rc));
    __atomic_store_n(&ledger[id], 0, __ATOMIC_RELEASE);
    atomic_fetch_add(&n_start_failed, 1);
    atomic_fetch_sub(&n_started, 1);
    free(c);
    fl_release();
    return;
  }

  if (kind >= M_CSTREAM) {
    if (c->n_msgs > 0) {
      atomic_fetch_add(&c->sent, 1);
      if (sluice_call_send(call, &first.base) != 0)
        atomic_fetch_sub(&c->sent, 1);
    }
    if (!c->pingpong || c->n_msgs == 0) {
      for (uint32_t i = 1; i < c->n_msgs; i++) {
        uint32_t before = atomic_load(&c->sent);
        send_req(call, c, i);
        if (atomic_load(&c->sent) == before)
          break; /* FULL, or the call is over */
      }
      sluice_call_close_send(call);
    }
  }

  /* Cancel at a random point: now, or a little later. */
  unsigned cp = (unsigned)(rnd(rs) % 100);
  if (cp < 12 && w->n_cancels < MAX_CANCELS) {
    pending_cancel *pc = &w->cancels[w->n_cancels++];
    pc->call = call;
    pc->c = c;
    pc->at_ms = soak_now_ms() + (cp < 3 ? 0 : rnd_in(rs, 1, 100));
    atomic_fetch_add(&n_cancel_sched, 1);
    if (cp < 3)
      run_cancels(w, 0);
    return;
  }
  sluice_call_release(call);
  ccall_unref(c);
}

static uint64_t end_ms;

static void *worker_main(void *arg) {
  worker *w = arg;
  while (soak_now_ms() < end_ms && !atomic_load(&stop_issuing) &&
         !atomic_load(&fatal)) {
    run_cancels(w, 0);
    pthread_mutex_lock(&fl_mu);
    int ok = inflight < max_inflight;
    if (ok) {
      inflight++;
    } else {
      struct timespec ts;
      soak_abs_ms(&ts, 5);
      pthread_cond_timedwait(&fl_cv, &fl_mu, &ts);
    }
    pthread_mutex_unlock(&fl_mu);
    if (ok)
      issue(w);
  }
  run_cancels(w, 1);
  return NULL;
}

/* ---- chaos */

/* The driver's own connections to server s (or all servers when s is
 * NULL) are shut down under the library's feet, as soak_server's "drop"
 * does on its side. */
/* Whether a peer address is one of the servers' (s, or any when NULL). */
static int is_server_peer(const struct sockaddr_storage *ss, void *ud) {
  const server *s = ud;
  for (unsigned i = 0; i < n_servers; i++) {
    const server *t = &servers[i];
    if (s && s != t)
      continue;
    if (ss->ss_family == AF_INET && t->port) {
      const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
      if (ntohs(in->sin_port) == t->port)
        return 1;
    } else if (ss->ss_family == AF_UNIX && !t->port) {
      const struct sockaddr_un *un = (const struct sockaddr_un *)ss;
      if (strcmp(un->sun_path, t->addr + 5) == 0)
        return 1;
    }
  }
  return 0;
}

static unsigned drop_client_sockets(const server *s) {
  return soak_shutdown_sockets(is_server_peer, (void *)s);
}

static void chaos_sleep(unsigned ms) {
  uint64_t until = soak_now_ms() + ms;
  while (soak_now_ms() < until && soak_now_ms() < end_ms &&
         !atomic_load(&fatal))
    soak_sleep_ms(50);
}

static void *chaos_main(void *arg) {
  uint64_t rs = *(uint64_t *)arg;
  int order[CH_KINDS];
  unsigned k = CH_KINDS;
  while (soak_now_ms() < end_ms && !atomic_load(&fatal)) {
    chaos_sleep(rnd_in(&rs, chaos_min_ms, chaos_max_ms));
    if (soak_now_ms() >= end_ms || atomic_load(&fatal))
      break;
    if (k == CH_KINDS) { /* every kind once per round, in random order */
      for (int i = 0; i < CH_KINDS; i++)
        order[i] = i;
      for (int i = CH_KINDS - 1; i > 0; i--) {
        int j = (int)(rnd(&rs) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
      k = 0;
    }
    int kind = order[k++];
    server *s = &servers[rnd(&rs) % n_servers];
    reap_unexpected();
    int st = 0;
    switch (kind) {
    case CH_KILL:
      kill(s->pid, SIGKILL);
      waitpid(s->pid, &st, 0);
      close(s->to);
      s->pid = 0;
      soak_sleep_ms(rnd_in(&rs, 0, 500)); /* down for a while */
      if (respawn(s) != 0)
        atomic_store(&fatal, 1);
      break;
    case CH_PAUSE:
      kill(s->pid, SIGSTOP);
      if (waitpid(s->pid, &st, WUNTRACED) != s->pid || !WIFSTOPPED(st)) {
        fprintf(stderr, "soak: server %s did not stop (0x%x)\n", s->addr, st);
        atomic_fetch_add(&n_server_deaths, 1);
        close(s->to);
        s->pid = 0;
        if (respawn(s) != 0)
          atomic_store(&fatal, 1);
        break;
      }
      s->paused = 1;
      soak_sleep_ms(rnd_in(&rs, 100, 2000));
      kill(s->pid, SIGCONT);
      waitpid(s->pid, &st, WCONTINUED);
      s->paused = 0;
      break;
    case CH_DROP_SRV:
      if (write(s->to, "drop\n", 5) != 5)
        fprintf(stderr, "soak: cannot tell %s to drop: %s\n", s->addr,
                strerror(errno));
      break;
    default:
      atomic_fetch_add(&n_cli_sockets_dropped,
                       drop_client_sockets(chance(&rs, 30) ? NULL : s));
      break;
    }
    atomic_fetch_add(&n_chaos[kind], 1);
  }
  return NULL;
}

/* ---- reporting */

static void print_codes(FILE *f) {
  for (unsigned c = 0; c < 17; c++) {
    uint64_t n = atomic_load(&by_code[c]);
    if (n)
      fprintf(f, " %s %" PRIu64, sluice_status_name((sluice_status_code)c), n);
  }
}

static void progress(uint64_t t0) {
  pthread_mutex_lock(&fl_mu);
  unsigned flying = inflight;
  pthread_mutex_unlock(&fl_mu);
  fprintf(stderr,
          "soak: %3" PRIu64 " s  calls %" PRIu64 " done %" PRIu64
          " in flight %u |",
          (soak_now_ms() - t0) / 1000, (uint64_t)atomic_load(&n_started),
          (uint64_t)atomic_load(&n_completed), flying);
  print_codes(stderr);
  fprintf(stderr, " | chaos");
  for (int k = 0; k < CH_KINDS; k++)
    fprintf(stderr, " %s %" PRIu64, chaos_names[k],
            (uint64_t)atomic_load(&n_chaos[k]));
  fprintf(stderr, " | rss %ld MiB heap %ld MiB\n", rss_kib() / 1024,
          heap_kib() / 1024);
}

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return x < y ? -1 : x > y;
}

static long median(const long *v, size_t n) {
  long *t = malloc(n * sizeof *t);
  if (!t)
    return v[0];
  memcpy(t, v, n * sizeof *t);
  qsort(t, n, sizeof *t, cmp_long);
  long m = t[n / 2];
  free(t);
  return m;
}

/* Memory must not keep growing: over the second half of the run (the first
 * half warms up caches, connection buffers, the allocator's size classes,
 * ASan's quarantine), the median of the last fifth of the samples may
 * exceed the median of the first fifth by at most max(floor, 25 %). The
 * live heap is the sharp measure (it ignores quarantine and allocator
 * caches); RSS gets a larger floor. */
static int check_growth(const char *what, const long *v, size_t n,
                        long floor_kib, int judged) {
  if (n < 10) {
    fprintf(stderr, "soak: %s: too few samples (%zu) to judge\n", what, n);
    return 0;
  }
  size_t half = n / 2, w = (n - half) / 5;
  if (w < 2)
    w = 2;
  long a = median(v + half, w), b = median(v + n - w, w);
  long bound = a / 4 > floor_kib ? a / 4 : floor_kib;
  int bad = b - a > bound;
  fprintf(stderr,
          "soak: %s: first %ld KiB, second half from %ld to %ld KiB (bound "
          "+%ld KiB)%s\n",
          what, v[0], a, b, bound,
          !judged ? " (not judged under TSan)"
          : bad   ? "  <-- GROWING"
                  : "");
  if (!judged)
    return 0;
  return bad ? -1 : 0;
}

static void usage(void) {
  fprintf(stderr, "usage: soak_driver --server PATH [--seconds N] "
                  "[--workers N] [--inflight N] [--chaos-ms MIN,MAX] "
                  "[--seed N] [--progress-s N] [--certs-script PATH]\n");
  exit(64);
}

int main(int argc, char **argv) {
  const char *env = getenv("SOAK_SECONDS");
  if (env && atoi(env) > 0)
    run_seconds = (unsigned)atoi(env);
  seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      usage();
    if (strcmp(argv[i], "--server") == 0)
      server_path = v;
    else if (strcmp(argv[i], "--seconds") == 0)
      run_seconds = (unsigned)atoi(v);
    else if (strcmp(argv[i], "--workers") == 0)
      n_workers = (unsigned)atoi(v);
    else if (strcmp(argv[i], "--inflight") == 0)
      max_inflight = (unsigned)atoi(v);
    else if (strcmp(argv[i], "--chaos-ms") == 0 &&
             sscanf(v, "%u,%u", &chaos_min_ms, &chaos_max_ms) == 2)
      ;
    else if (strcmp(argv[i], "--seed") == 0)
      seed = strtoull(v, NULL, 0);
    else if (strcmp(argv[i], "--certs-script") == 0)
      certs_script = v;
    else if (strcmp(argv[i], "--progress-s") == 0)
      progress_s = (unsigned)atoi(v);
    else
      usage();
    i++;
  }
  if (!server_path || run_seconds == 0 || n_workers == 0 ||
      n_workers > MAX_WORKERS || max_inflight == 0 || progress_s == 0 ||
      chaos_min_ms == 0 || chaos_max_ms < chaos_min_ms)
    usage();
  if (seed == 0)
    seed = 1;
  signal(SIGPIPE, SIG_IGN);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&fl_cv, &ca);
  pthread_condattr_destroy(&ca);
  for (size_t i = 0; i < sizeof req_payload; i++)
    req_payload[i] = pattern(i);

  /* The ledger is touched in full now, so that it does not show as growth
   * later. */
  ledger_cap = (uint64_t)run_seconds * 20000u;
  if (ledger_cap < (1u << 20))
    ledger_cap = 1u << 20;
  if (ledger_cap > (1u << 27))
    ledger_cap = 1u << 27;
  ledger = malloc(ledger_cap);
  if (!ledger)
    return 1;
  memset(ledger, 0, ledger_cap);

  fprintf(stderr,
          "soak: %u s, %u workers, %u calls in flight, chaos every %u-%u ms, "
          "seed %" PRIu64 "\n",
          run_seconds, n_workers, max_inflight, chaos_min_ms, chaos_max_ms,
          seed);
  /* libuv opens a process-wide pipe (its signal lock) with the first loop
   * and keeps it: a channel made and destroyed first puts it into the
   * baseline. */
  sluice_channel *warm;
  if (sluice_channel_new(&warm, "ipv4:127.0.0.1:1", NULL) != 0)
    return 1;
  sluice_channel_del(warm);
  int threads0 = soak_count_dir("/proc/self/task");
  int fds0 = soak_count_dir("/proc/self/fd");
  int failed = 0;

  uint64_t rs = seed;
  snprintf(sock_dir, sizeof sock_dir, "/tmp/sluice-soak-XXXXXX");
  if (!mkdtemp(sock_dir)) {
    perror("soak: mkdtemp");
    return 1;
  }
  if (certs_script) { /* made afresh, as tests/e2e/test_tls.c does */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh '%s' '%s/certs'", certs_script, sock_dir);
    if (system(cmd) != 0) {
      fprintf(stderr, "soak: %s failed\n", cmd);
      return 1;
    }
    static const char *const names[3] = {"ca.pem", "server.pem", "server.key"};
    for (int i = 0; i < 3; i++)
      snprintf(cert_path[i], sizeof cert_path[i], "%s/certs/%s", sock_dir,
               names[i]);
    n_servers = N_SERVERS;
    n_channels = N_CHANNELS;
  }
  for (unsigned i = 0; i < n_servers; i++) {
    server *s = &servers[i];
    s->max_age = i == 1 ? "3000" : "0";
    s->tls = i == TLS_SERVER;
    if (i == UNIX_SERVER)
      snprintf(s->addr, sizeof s->addr, "unix:%s/s%u.sock", sock_dir, i);
    if (first_start(s, &rs, (int)i) != 0) {
      fprintf(stderr, "soak: cannot start server %u\n", i);
      return 1;
    }
    fprintf(stderr, "soak: server %u on %s%s (pid %d)\n", i, s->addr,
            s->tls ? " (TLS)" : "", (int)s->pid);
  }
  if (make_channels() != 0)
    return 1;
  for (unsigned i = 0; i < n_channels; i++)
    fprintf(stderr, "soak: channel %u: %s\n", i, channel_desc[i]);

  uint64_t t0 = soak_now_ms();
  end_ms = t0 + (uint64_t)run_seconds * 1000u;
  size_t n_samples = 0, cap_samples = run_seconds + 8;
  long *rss = calloc(cap_samples, sizeof *rss);
  long *heap = calloc(cap_samples, sizeof *heap);
  worker *ws = calloc(n_workers, sizeof *ws);
  if (!rss || !heap || !ws)
    return 1;
  for (unsigned i = 0; i < n_workers; i++) {
    ws[i].rs = seed * 0x9E3779B97F4A7C15ULL + i + 1;
    if (pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]) != 0)
      return 1;
  }
  uint64_t chaos_seed = seed ^ 0xC4A05ULL;
  pthread_t chaos;
  if (pthread_create(&chaos, NULL, chaos_main, &chaos_seed) != 0)
    return 1;

  uint64_t next_sample = t0 + 1000, next_progress = t0 + progress_s * 1000u;
  while (soak_now_ms() < end_ms && !atomic_load(&fatal)) {
    soak_sleep_ms(50);
    uint64_t now = soak_now_ms();
    if (now >= next_sample && n_samples < cap_samples) {
      rss[n_samples] = rss_kib();
      heap[n_samples++] = heap_kib();
      next_sample += 1000;
    }
    if (now >= next_progress) {
      progress(t0);
      next_progress += progress_s * 1000u;
    }
  }
  for (unsigned i = 0; i < n_workers; i++)
    pthread_join(ws[i].tid, NULL);
  pthread_join(chaos, NULL);
  if (atomic_load(&fatal)) {
    fprintf(stderr, "soak: FATAL: the run could not go on (see above)\n");
    failed = 1;
  }
  reap_unexpected();
  for (unsigned i = 0; i < n_servers; i++)
    if (servers[i].pid > 0 && servers[i].paused) {
      kill(servers[i].pid, SIGCONT);
      servers[i].paused = 0;
    }

  /* Every call started must complete. */
  uint64_t drain_until = soak_now_ms() + DRAIN_MS;
  while (atomic_load(&n_completed) < atomic_load(&n_started) &&
         soak_now_ms() < drain_until) {
    soak_sleep_ms(50);
    if (soak_now_ms() >= next_progress) {
      progress(t0);
      next_progress += progress_s * 1000u;
    }
  }
  progress(t0);
  uint64_t last_id = atomic_load(&next_id);
  if (last_id > ledger_cap)
    last_id = ledger_cap;
  uint64_t lost = 0;
  for (uint64_t id = 1; id < last_id; id++)
    if (__atomic_load_n(&ledger[id], __ATOMIC_ACQUIRE) == 1 && lost++ < 20)
      fprintf(stderr, "soak: call %" PRIu64 " never completed\n", id);

  for (unsigned i = 0; i < n_channels; i++)
    sluice_channel_del(channels[i]);
  int servers_bad = 0;
  for (unsigned i = 0; i < n_servers; i++)
    if (stop_server(&servers[i]) != 0)
      servers_bad++;
  char path[128];
  snprintf(path, sizeof path, "%s/s%d.sock", sock_dir, UNIX_SERVER);
  unlink(path); /* left behind by a killed server */
  if (certs_script) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/certs'", sock_dir);
    if (system(cmd) != 0)
      fprintf(stderr, "soak: %s failed\n", cmd);
  }
  rmdir(sock_dir);

  /* Threads end and descriptors close as the channels go; allow a moment
   * for a thread that is on its way out. */
  int threads1 = -1, fds1 = -1;
  for (int i = 0; i < 100; i++) {
    threads1 = soak_count_dir("/proc/self/task");
    fds1 = soak_count_dir("/proc/self/fd");
    if (threads1 == threads0 && fds1 == fds0)
      break;
    soak_sleep_ms(50);
  }

  uint64_t started = atomic_load(&n_started);
  uint64_t completed = atomic_load(&n_completed);
  fprintf(stderr, "\nsoak: summary after %u s (seed %" PRIu64 ")\n",
          run_seconds, seed);
  fprintf(stderr,
          "soak: calls started %" PRIu64 " completed %" PRIu64 " lost %" PRIu64
          " doubled %" PRIu64 " wrong %" PRIu64 " start failures %" PRIu64 "\n",
          started, completed, lost, (uint64_t)atomic_load(&n_doubled),
          (uint64_t)atomic_load(&n_wrong),
          (uint64_t)atomic_load(&n_start_failed));
  fprintf(stderr,
          "soak: kinds unary %" PRIu64 " (blocking %" PRIu64
          ") server-stream %" PRIu64 " client-stream %" PRIu64 " bidi %" PRIu64
          "; retry policy %" PRIu64 ", hedging %" PRIu64
          ", wait-for-ready %" PRIu64 "\n",
          (uint64_t)atomic_load(&by_kind[M_UNARY]),
          (uint64_t)atomic_load(&n_blocking),
          (uint64_t)atomic_load(&by_kind[M_SSTREAM]),
          (uint64_t)atomic_load(&by_kind[M_CSTREAM]),
          (uint64_t)atomic_load(&by_kind[M_BIDI]),
          (uint64_t)atomic_load(&n_retry_policy),
          (uint64_t)atomic_load(&n_hedging_policy),
          (uint64_t)atomic_load(&n_wait_for_ready));
  fprintf(stderr, "soak: by status:");
  print_codes(stderr);
  fprintf(stderr, "\n");
  for (int k = 0; k < M_COUNT; k++) {
    fprintf(stderr, "soak:   %-13s", kind_names[k]);
    for (unsigned c = 0; c < 17; c++) {
      uint64_t n = atomic_load(&by_kind_code[k][c]);
      if (n)
        fprintf(stderr, " %s %" PRIu64,
                sluice_status_name((sluice_status_code)c), n);
    }
    fprintf(stderr, "\n");
  }
  for (unsigned c = 0; c < 17; c++)
    if (first_msg[c][0])
      fprintf(stderr, "soak:   %s e.g. \"%s\"\n",
              sluice_status_name((sluice_status_code)c), first_msg[c]);
  fprintf(stderr,
          "soak: asked-for failures seen %" PRIu64
          ", cancels scheduled %" PRIu64 " + in on_message %" PRIu64 "\n",
          (uint64_t)atomic_load(&n_asked_fail),
          (uint64_t)atomic_load(&n_cancel_sched),
          (uint64_t)atomic_load(&n_cancel_in_cb));
  fprintf(stderr, "soak: chaos:");
  for (int k = 0; k < CH_KINDS; k++)
    fprintf(stderr, " %s %" PRIu64, chaos_names[k],
            (uint64_t)atomic_load(&n_chaos[k]));
  fprintf(stderr, " (client sockets shut %" PRIu64 "), server starts:",
          (uint64_t)atomic_load(&n_cli_sockets_dropped));
  for (unsigned i = 0; i < n_servers; i++)
    fprintf(stderr, " %u", servers[i].starts);
  fprintf(stderr, ", unexpected server deaths %" PRIu64 "\n",
          (uint64_t)atomic_load(&n_server_deaths));
  fprintf(stderr, "soak: threads %d -> %d, fds %d -> %d\n", threads0, threads1,
          fds0, fds1);
  if (n_samples) {
    long rss_max = 0;
    for (size_t i = 0; i < n_samples; i++)
      if (rss[i] > rss_max)
        rss_max = rss[i];
    fprintf(stderr,
            "soak: rss first %ld last %ld max %ld MiB; heap first %ld last "
            "%ld MiB (%zu samples)\n",
            rss[0] / 1024, rss[n_samples - 1] / 1024, rss_max / 1024,
            heap[0] / 1024, heap[n_samples - 1] / 1024, n_samples);
  }

  /* The verdict. */
  if (lost || completed != started || atomic_load(&n_doubled) ||
      atomic_load(&n_unknown_id)) {
    fprintf(stderr, "soak: FAIL: calls lost or completed twice\n");
    failed = 1;
  }
  if (atomic_load(&n_wrong)) {
    fprintf(stderr, "soak: FAIL: wrong answers\n");
    failed = 1;
  }
  if (atomic_load(&n_server_deaths)) {
    fprintf(stderr, "soak: FAIL: servers died on their own\n");
    failed = 1;
  }
  if (servers_bad) {
    fprintf(stderr, "soak: FAIL: %d server(s) did not exit cleanly\n",
            servers_bad);
    failed = 1;
  }
  if (threads1 != threads0 || fds1 != fds0) {
    fprintf(stderr, "soak: FAIL: threads or descriptors leaked\n");
    dump_fds();
    failed = 1;
  }
  struct {
    const char *what;
    uint64_t n;
  } need[] = {
      {"OK", atomic_load(&by_code[SLUICE_STATUS_OK])},
      {"DEADLINE_EXCEEDED",
       atomic_load(&by_code[SLUICE_STATUS_DEADLINE_EXCEEDED])},
      {"CANCELLED", atomic_load(&by_code[SLUICE_STATUS_CANCELLED])},
      {"UNAVAILABLE", atomic_load(&by_code[SLUICE_STATUS_UNAVAILABLE])},
      {"asked-for failures", atomic_load(&n_asked_fail)},
      {"kills", atomic_load(&n_chaos[CH_KILL])},
      {"pauses", atomic_load(&n_chaos[CH_PAUSE])},
      {"server drops", atomic_load(&n_chaos[CH_DROP_SRV])},
      {"client drops", atomic_load(&n_chaos[CH_DROP_CLI])},
  };
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (need[i].n == 0) {
      fprintf(stderr, "soak: FAIL: no %s happened (a soak that did nothing)\n",
              need[i].what);
      failed = 1;
    }
  if (check_growth("live heap", heap, n_samples, 16 * 1024, 1) != 0 ||
      check_growth("rss", rss, n_samples, 48 * 1024, !SOAK_TSAN) != 0) {
    fprintf(stderr, "soak: FAIL: memory keeps growing\n");
    failed = 1;
  }
  free(rss);
  free(heap);
  free(ws);
  free(ledger);
  pthread_cond_destroy(&fl_cv);
  fprintf(stderr, "soak: %s\n", failed ? "FAILED" : "PASSED");
  return failed;
}
