/* testbed_layer: one layer of the chain testbed (docs/results/README.md).
 *
 *   testbed_layer --port N --workers W --service-us U
 *                 [--next TARGET --lb rr|lcc|bcc|btc] [--threads T]
 *                 [--name NAME] [--stats FILE]
 *
 * Serves testbed.Layer/Call. Its capacity is simulated: a pool of W worker
 * threads, each spending U microseconds per call (sleeping, so that a 2-core
 * machine can host the whole chain: the capacity is W / U calls per
 * microsecond whatever the CPU does). The handler only queues the call; a
 * worker takes it (FIFO), skips it when the client has given up meanwhile
 * (cancelled or past its deadline: no work is spent on it), otherwise
 * "works" U us, then either echoes the request (no --next: the database) or
 * forwards it through one sluice channel to TARGET (e.g.
 * "ipv4:127.0.0.1:P1,127.0.0.1:P2") with strategy --lb, passing on the
 * call's deadline (sluice_call_opts_set_parent). The worker does not wait
 * for the downstream answer: the channel's callback finishes the call with
 * it, or with the downstream status when it failed: the same code, and the
 * message with "; passed on by NAME" appended, so that every layer above
 * can tell a call its own channel refused from one refused further down.
 *
 * Each downstream call is timed from just before it is started to its
 * completion callback and classed by its outcome: ok; early_drop
 * (RESOURCE_EXHAUSTED "dropped locally": this layer's strategy refused it);
 * deadline_refusal (DEADLINE_EXCEEDED "dropped locally": this layer's
 * strategy saw that the deadline could not be met); downstream_drop (either
 * of those, made by a layer further down and passed on); timeout (any other
 * DEADLINE_EXCEEDED); other (any other error). One log-linear histogram per
 * class (hist.h); the stats give n, p50, p99, max (and the non-empty
 * buckets) of each under "kinds". For the local drops, "drop_decided"
 * holds the library's own figure from the drop's message ("decided in N
 * us": from the call's start to the strategy's decision), so the rest of
 * the drop's latency is the delivery of its completion.
 *
 * Prints "listening on PORT" on stdout. SIGUSR1 writes the statistics as
 * one JSON line (to --stats FILE, appended, or to stderr); SIGINT/SIGTERM
 * shut down gracefully and write them once more.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "hist.h"
#include "serve.h"
#include "testbed.sluice.h"

#define SHUTDOWN_GRACE_MS 2000
#define MAX_WORKERS 1024
#define PASSED_ON "; passed on by "
#define DROPPED_LOCALLY "dropped locally"

/* Outcome classes of the downstream calls (see the top comment). */
enum {
  K_OK,
  K_EARLY_DROP,
  K_DEADLINE_REFUSAL,
  K_DOWNSTREAM_DROP,
  K_TIMEOUT,
  K_OTHER,
  N_KINDS
};
static const char *const kind_names[N_KINDS] = {
    "ok",      "early_drop", "deadline_refusal", "downstream_drop",
    "timeout", "other"};

typedef struct job {
  sluice_server_call *call;
  const Testbed__Msg *req; /* borrowed until the call is finished */
  uint64_t queued_ns;
  uint64_t fwd_start_ns; /* when the downstream call was started */
  struct job *next;
} job;

static struct {
  const char *name;
  unsigned workers;
  unsigned long service_us;
  sluice_channel *ch; /* NULL for the database */
  const char *lb;
  int port;

  pthread_mutex_t mu;
  pthread_cond_t cv;
  job *head, *tail;
  size_t queued;
  unsigned busy; /* workers in their service time */
  int stopping;
  sluice_server *srv; /* for the load report (set once it exists) */

  /* counters (atomics: workers, loop threads and the dumper) */
  atomic_uint_fast64_t received, skipped, served, fwd_ok, fwd_failed,
      fwd_start_failed, queue_wait_ns, queue_max;
  tb_hist kinds[N_KINDS]; /* latency of the downstream calls, by outcome */
  tb_hist drop_decided;   /* local drops: "decided in N us" */
} L;

/* ---- statistics */

static void dump_stats(FILE *f, const char *why) {
  fprintf(f,
          "{\"layer\":\"%s\",\"port\":%d,\"why\":\"%s\",\"workers\":%u,"
          "\"service_us\":%lu,\"received\":%" PRIuFAST64
          ",\"skipped\":%" PRIuFAST64 ",\"served\":%" PRIuFAST64
          ",\"fwd_ok\":%" PRIuFAST64 ",\"fwd_failed\":%" PRIuFAST64
          ",\"queue_wait_us_mean\":%.1f,\"queue_max\":%" PRIuFAST64,
          L.name, L.port, why, L.workers, L.service_us,
          atomic_load(&L.received), atomic_load(&L.skipped),
          atomic_load(&L.served), atomic_load(&L.fwd_ok),
          atomic_load(&L.fwd_failed),
          atomic_load(&L.served) + atomic_load(&L.skipped) > 0
              ? (double)atomic_load(&L.queue_wait_ns) / 1e3 /
                    (double)(atomic_load(&L.served) + atomic_load(&L.skipped))
              : 0.0,
          atomic_load(&L.queue_max));
  if (L.ch != NULL) {
    fprintf(f, ",\"kinds\":{");
    for (int k = 0; k < N_KINDS; k++) {
      fprintf(f, "%s\"%s\":", k ? "," : "", kind_names[k]);
      tb_hist_json(f, &L.kinds[k]);
    }
    fprintf(f, "},\"drop_decided\":");
    tb_hist_json(f, &L.drop_decided);
  }
  sluice_channel_stats s;
  if (L.ch != NULL && sluice_channel_get_stats(L.ch, &s) == 0) {
    fprintf(f,
            ",\"channel\":{\"lb\":\"%s\",\"dropped_unavailable\":%" PRIu64
            ",\"dropped_limit\":%" PRIu64 ",\"dropped_path_limit\":%" PRIu64
            ",\"dropped_deadline\":%" PRIu64 ",\"dropped_wait\":%" PRIu64
            ",\"dests\":[",
            s.lb, s.dropped_unavailable, s.dropped_limit, s.dropped_path_limit,
            s.dropped_deadline, s.dropped_wait);
    for (size_t i = 0; i < s.n_dests; i++) {
      const sluice_dest_stats *d = &s.dests[i];
      fprintf(f,
              "%s{\"address\":\"%s\",\"conn\":\"%s\",\"lb_state\":\"%s\","
              "\"in_flight\":%u,\"limit\":%.1f,\"adaptive_limit\":%.1f,"
              "\"rate\":%.1f,\"latency_min_us\":%.1f,"
              "\"latency_ewma_us\":%.1f,\"peer_utilization\":%.3f,"
              "\"sent\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"failed\":%" PRIu64
              ",\"p50_us\":%" PRIu64 ",\"p99_us\":%" PRIu64
              ",\"p999_us\":%" PRIu64 ",\"algo_ns\":%.1f,"
              "\"strategy_us\":%.2f}",
              i > 0 ? "," : "", d->address, d->conn_state, d->lb_state,
              d->in_flight, d->limit, d->adaptive_limit, d->rate,
              d->latency_min_us, d->latency_ewma_us, d->peer_utilization,
              d->sent, d->ok, d->failed, d->p50_us, d->p99_us, d->p999_us,
              d->algo_ns, d->strategy_us);
    }
    fprintf(f, "]}");
    sluice_channel_stats_clear(&s);
  }
  fprintf(f, "}\n");
  fflush(f);
}

static void dump_stats_to(const char *path, const char *why) {
  if (path == NULL) {
    dump_stats(stderr, why);
    return;
  }
  FILE *f = fopen(path, "a");
  if (f == NULL) {
    fprintf(stderr, "%s: cannot open %s: %s\n", L.name, path, strerror(errno));
    dump_stats(stderr, why);
    return;
  }
  dump_stats(f, why);
  fclose(f);
}

/* ---- forwarding */

static int classify(const sluice_status *st) {
  if (st->code == SLUICE_STATUS_OK)
    return K_OK;
  const char *m = st->message != NULL ? st->message : "";
  int dropped = strstr(m, DROPPED_LOCALLY) != NULL;
  int here = strstr(m, PASSED_ON) == NULL; /* not from further down */
  if (st->code == SLUICE_STATUS_RESOURCE_EXHAUSTED && dropped)
    return here ? K_EARLY_DROP : K_DOWNSTREAM_DROP;
  if (st->code == SLUICE_STATUS_DEADLINE_EXCEEDED && dropped)
    return here ? K_DEADLINE_REFUSAL : K_DOWNSTREAM_DROP;
  if (st->code == SLUICE_STATUS_DEADLINE_EXCEEDED)
    return K_TIMEOUT;
  return K_OTHER;
}

/* The channel's callback (its loop thread): records the downstream call's
 * latency and outcome, then finishes the server call with it. */
static void forward_done(const sluice_status *st, const Testbed__Msg *resp,
                         void *user_data) {
  job *j = user_data;
  uint64_t took = sluice_now_ns() - j->fwd_start_ns;
  int kind = classify(st);
  tb_hist_record(&L.kinds[kind], took);
  if (kind == K_EARLY_DROP || kind == K_DEADLINE_REFUSAL) {
    const char *d = strstr(st->message, "decided in ");
    unsigned long long us;
    if (d != NULL && sscanf(d, "decided in %llu us", &us) == 1)
      tb_hist_record(&L.drop_decided, us * 1000ull);
  }
  sluice_server_call *call = j->call;
  free(j);
  if (st->code == SLUICE_STATUS_OK) {
    atomic_fetch_add(&L.fwd_ok, 1);
    testbed__layer__call__reply(call, resp);
    return;
  }
  atomic_fetch_add(&L.fwd_failed, 1);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s" PASSED_ON "%s",
           st->message != NULL ? st->message : "", L.name);
  sluice_server_call_finish(call, st->code, msg, NULL);
}

/* Runs on a worker thread, after the simulated work. Returns 1 when j now
 * belongs to the downstream call (forward_done frees it; it may already
 * have done so), 0 when the caller still owns it. */
static int pass_on(job *j) {
  Testbed__Msg out = TESTBED__MSG__INIT;
  out.payload = j->req->payload;
  out.hops = j->req->hops + 1;
  if (L.ch == NULL) { /* the database: echo */
    testbed__layer__call__reply(j->call, &out);
    return 0;
  }
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  sluice_call_opts_set_parent(&opts, j->call);
  j->fwd_start_ns = sluice_now_ns();
  int rc = testbed__layer__call__async(L.ch, &out, &opts, forward_done, j);
  if (rc == 0)
    return 1;
  atomic_fetch_add(&L.fwd_start_failed, 1);
  sluice_server_call_finish(j->call, SLUICE_STATUS_INTERNAL,
                            "cannot start the downstream call", NULL);
  return 0;
}

static void sleep_us(unsigned long us) {
  struct timespec ts = {.tv_sec = (time_t)(us / 1000000UL),
                        .tv_nsec = (long)(us % 1000000UL) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Tells clients how busy this layer is (mu held): the worker pool, not the
 * library, is where calls wait here, so the library cannot know. Sent in
 * the load report as application_utilization; the strategies read it. */
static void report_load(void) {
  if (L.srv)
    sluice_server_set_utilization(L.srv, (double)(L.busy + L.queued) /
                                             (double)L.workers);
}

static void *worker_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&L.mu);
    while (L.head == NULL && !L.stopping)
      pthread_cond_wait(&L.cv, &L.mu);
    job *j = L.head;
    if (j != NULL) {
      L.head = j->next;
      if (L.head == NULL)
        L.tail = NULL;
      L.queued--;
      L.busy++;
      report_load();
    }
    int stopping = L.stopping;
    pthread_mutex_unlock(&L.mu);
    if (j == NULL)
      return NULL; /* stopping and nothing left */

    uint64_t now = sluice_now_ns();
    atomic_fetch_add(&L.queue_wait_ns, now - j->queued_ns);
    uint64_t deadline = sluice_server_call_deadline(j->call);
    int skipped = 0;
    if (stopping) {
      sluice_server_call_finish(j->call, SLUICE_STATUS_UNAVAILABLE,
                                "layer shutting down", NULL);
    } else if (sluice_server_call_is_cancelled(j->call) ||
               (deadline != 0 && now >= deadline)) {
      skipped = 1;
      atomic_fetch_add(&L.skipped, 1);
      sluice_server_call_finish(j->call, SLUICE_STATUS_DEADLINE_EXCEEDED,
                                "expired in the layer's queue", NULL);
    } else {
      sleep_us(L.service_us);
      atomic_fetch_add(&L.served, 1);
    }
    pthread_mutex_lock(&L.mu);
    L.busy--;
    report_load();
    pthread_mutex_unlock(&L.mu);
    if (!stopping && !skipped && pass_on(j))
      continue; /* j is the downstream call's now */
    free(j);
  }
}

/* ---- the handler (loop thread): queue only */

static void handle_call(sluice_server_call *call, const Testbed__Msg *req,
                        void *user_data) {
  (void)user_data;
  atomic_fetch_add(&L.received, 1);
  job *j = malloc(sizeof *j);
  if (j == NULL) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  j->call = call;
  j->req = req;
  j->queued_ns = sluice_now_ns();
  j->next = NULL;
  pthread_mutex_lock(&L.mu);
  if (L.tail != NULL)
    L.tail->next = j;
  else
    L.head = j;
  L.tail = j;
  L.queued++;
  report_load();
  if (L.queued > atomic_load(&L.queue_max))
    atomic_store(&L.queue_max, L.queued);
  pthread_cond_signal(&L.cv);
  pthread_mutex_unlock(&L.mu);
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --port N --workers W --service-us U\n"
          "          [--next TARGET --lb rr|lcc|bcc|btc] [--threads T]\n"
          "          [--name NAME] [--stats FILE]\n",
          prog);
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *next = NULL, *stats_path = NULL;
  unsigned long port = 0, workers = 4, service_us = 1000, threads = 1;
  L.name = "layer";
  L.lb = "btc";

  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    const char *val = i + 1 < argc ? argv[++i] : NULL;
    int bad = val == NULL || *val == '\0';
    if (strcmp(flag, "--port") == 0)
      bad = sluice_example_parse_ulong(val, 65535, &port);
    else if (strcmp(flag, "--workers") == 0)
      bad = sluice_example_parse_ulong(val, MAX_WORKERS, &workers) ||
            workers == 0;
    else if (strcmp(flag, "--service-us") == 0)
      bad = sluice_example_parse_ulong(val, 10000000UL, &service_us);
    else if (strcmp(flag, "--threads") == 0)
      bad = sluice_example_parse_ulong(val, 64, &threads);
    else if (strcmp(flag, "--next") == 0)
      next = val;
    else if (strcmp(flag, "--lb") == 0)
      L.lb = val;
    else if (strcmp(flag, "--name") == 0)
      L.name = val;
    else if (strcmp(flag, "--stats") == 0)
      stats_path = val;
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
  L.workers = (unsigned)workers;
  L.service_us = service_us;

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  pthread_mutex_init(&L.mu, NULL);
  pthread_cond_init(&L.cv, NULL);
  for (int k = 0; k < N_KINDS; k++)
    tb_hist_init(&L.kinds[k]);
  tb_hist_init(&L.drop_decided);

  int exit_code = 1, rc;
  sluice_server_opts *sopts = NULL;
  sluice_server *srv = NULL;
  pthread_t tids[MAX_WORKERS];
  unsigned started = 0;

  if (next != NULL) {
    sluice_channel_opts *co = NULL;
    if ((rc = sluice_channel_opts_new(&co)) != 0 ||
        (rc = sluice_channel_opts_set_lb(co, L.lb)) != 0 ||
        (rc = sluice_channel_new(&L.ch, next, co)) != 0) {
      fprintf(stderr, "%s: cannot create the channel to %s (lb %s): %s\n", prog,
              next, L.lb, sluice_strerror(rc));
      sluice_channel_opts_del(co);
      return 2;
    }
    sluice_channel_opts_del(co);
  }
  for (; started < L.workers; started++)
    if (pthread_create(&tids[started], NULL, worker_main, NULL) != 0) {
      fprintf(stderr, "%s: cannot start worker threads\n", prog);
      goto out;
    }

  char address[64];
  snprintf(address, sizeof address, "127.0.0.1:%lu", port);
  const Testbed__Layer_SluiceHandlers handlers = {.call = handle_call};
  if ((rc = sluice_server_opts_new(&sopts)) != 0 ||
      (rc = sluice_server_opts_set_threads(sopts, (unsigned)threads)) != 0 ||
      (rc = sluice_server_new(&srv, sopts)) != 0 ||
      (rc = testbed__layer__sluice_register(srv, &handlers, NULL)) != 0 ||
      (rc = sluice_server_listen(srv, address, &L.port)) != 0 ||
      (rc = sluice_server_start(srv)) != 0) {
    fprintf(stderr, "%s: cannot start the server on %s: %s\n", prog, address,
            sluice_strerror(rc));
    goto out;
  }
  pthread_mutex_lock(&L.mu);
  L.srv = srv;
  report_load();
  pthread_mutex_unlock(&L.mu);
  printf("listening on %d\n", L.port);
  fflush(stdout);

  for (;;) {
    int sig = 0;
    if (sigwait(&sigs, &sig) != 0)
      continue;
    if (sig == SIGUSR1) {
      dump_stats_to(stats_path, "SIGUSR1");
      continue;
    }
    break;
  }
  sluice_server_shutdown(srv, SHUTDOWN_GRACE_MS);
  dump_stats_to(stats_path, "exit");
  exit_code = 0;

out:
  /* Workers finish what is queued (UNAVAILABLE) and stop; then the channel
   * completes the forwarded calls still in flight (CANCELLED), which
   * finishes their server calls; only then is the server freed. */
  pthread_mutex_lock(&L.mu);
  L.stopping = 1;
  pthread_cond_broadcast(&L.cv);
  pthread_mutex_unlock(&L.mu);
  for (unsigned i = 0; i < started; i++)
    pthread_join(tids[i], NULL);
  pthread_mutex_lock(&L.mu);
  L.srv = NULL;
  pthread_mutex_unlock(&L.mu);
  sluice_channel_del(L.ch);
  sluice_server_del(srv);
  sluice_server_opts_del(sopts);
  return exit_code;
}
