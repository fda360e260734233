/* soak_server: the server process of the soak test (soak_driver.c,
 * docs/soak.md). Serves soak.Soak (soak.proto), whose requests say what the
 * handler does: answer, fail with a given status, stall N ms, answer from
 * the worker thread instead of the loop, echo the soak-* metadata, gzip
 * the responses, send large payloads.
 *
 *   soak_server ADDRESS [MAX_AGE_MS [CERT.pem KEY.pem]]
 *
 * ADDRESS is "127.0.0.1:PORT" or "unix:/path". MAX_AGE_MS (0: none) gives
 * the connections a max age, so that graceful GOAWAYs happen under load.
 * With CERT and KEY it serves TLS only.
 * Prints "ready" on stdout once it serves, or exits 2 when it cannot
 * listen there (the driver then tries again or another port). Then reads
 * stdin:
 *   "drop"  shuts down (shutdown(2), SHUT_RDWR) every connected socket of
 *           the process under the library's feet: abrupt connection loss
 *           while calls are open;
 *   EOF     graceful shutdown; every call must have had exactly one
 *           on_done and one finish, and the process must be back to the
 *           threads and descriptors it had before it served; exits 0 if
 *           so (ASan's leak check then runs at exit), 1 if not.
 *
 * Every call's state is a job. Jobs live under one mutex (the server is
 * not what is measured). A job holds references: the call's (dropped when
 * finish returns), on_done's, the worker queue's and one for any API call
 * made outside the mutex; it is freed when the last goes. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

#include "soak.sluice.h"
#include "soak_util.h"

#define MAX_REPLY (256u * 1024u) /* the largest reply_size honoured */
#define MAX_STALL_MS 5000u
#define MAX_COUNT 64u

enum { M_UNARY, M_SSTREAM, M_CSTREAM, M_BIDI };

typedef struct job job;
struct job {
  sluice_server_call *call; /* valid while !finished */
  int method;
  int refs;
  int finished; /* finish called (or being called) */
  int done;     /* on_done fired */
  int params;   /* the first request's fields were read */
  int queued;   /* in the worker's queue */
  int running;  /* the worker is running it */
  int waiting;  /* a stream's send queue was full: on_send_ready resumes */
  uint64_t id;
  uint32_t fail_code, stall_ms, reply_size, count;
  int from_thread, echo_md, compress;
  uint32_t next;     /* ServerStream: responses sent */
  uint32_t received; /* ClientStream, Bidi: requests received */
  uint64_t due_ms;
  job *qnext;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static job *queue; /* the worker's, unsorted (it holds at most the calls in
                      flight) */
static int stopping;
static uint8_t payload[MAX_REPLY];

/* Under mu; checked at exit. */
static uint64_t n_jobs, n_freed, n_done, n_finished, n_double_done;
static uint64_t n_finish_err, n_drops;

static void job_unref_locked(job *j) {
  if (--j->refs == 0) {
    n_freed++;
    free(j);
  }
}

static void job_unref(job *j) {
  pthread_mutex_lock(&mu);
  job_unref_locked(j);
  pthread_mutex_unlock(&mu);
}

/* Reads the behaviour from a request (the first of a streaming call). */
static void take_params(job *j, const Soak__Req *r) {
  j->params = 1;
  j->id = r->id;
  j->fail_code = r->fail_code;
  j->stall_ms = r->stall_ms < MAX_STALL_MS ? r->stall_ms : MAX_STALL_MS;
  j->from_thread = r->from_thread;
  j->reply_size = r->reply_size < MAX_REPLY ? r->reply_size : MAX_REPLY;
  j->count = r->count < MAX_COUNT ? r->count : MAX_COUNT;
  j->echo_md = r->echo_md;
  j->compress = r->compress;
}

/* Before the first response: metadata and compression (loop thread or
 * the worker; the call is not finished). */
static void prepare(job *j, sluice_server_call *call) {
  if (j->compress)
    sluice_server_call_set_compression(call, SLUICE_COMPRESS_GZIP);
  if (!j->echo_md)
    return;
  const sluice_metadata *md = sluice_server_call_metadata(call);
  for (size_t i = 0; i < sluice_metadata_count(md); i++) {
    const char *k;
    const void *v;
    size_t n;
    if (sluice_metadata_get(md, i, &k, &v, &n) != 0 ||
        strncmp(k, "soak-", 5) != 0)
      continue;
    sluice_server_call_add_initial_metadata(call, k, v, n);
    sluice_server_call_add_trailing_metadata(call, k, v, n);
  }
}

/* Finishes the call once (any thread; the caller holds a reference and not
 * mu). resp NULL with OK: the streamed responses were the answer. */
static void finish(job *j, sluice_status_code code, const char *msg,
                   const Soak__Resp *resp) {
  pthread_mutex_lock(&mu);
  if (j->finished) {
    pthread_mutex_unlock(&mu);
    return;
  }
  j->finished = 1;
  sluice_server_call *call = j->call;
  pthread_mutex_unlock(&mu);
  int rc =
      sluice_server_call_finish(call, code, msg, resp ? &resp->base : NULL);
  pthread_mutex_lock(&mu);
  n_finished++;
  if (rc != 0)
    n_finish_err++;
  job_unref_locked(j); /* the call's */
  pthread_mutex_unlock(&mu);
}

static void resp_init(Soak__Resp *r, const job *j, uint32_t seq) {
  soak__resp__init(r);
  r->id = j->id;
  r->seq = seq;
  r->payload.data = payload;
  r->payload.len = j->reply_size;
}

static void finish_asked(job *j, const Soak__Resp *resp) {
  if (j->fail_code)
    finish(j, (sluice_status_code)j->fail_code, "soak: asked to fail", NULL);
  else
    finish(j, SLUICE_STATUS_OK, NULL, resp);
}

/* ServerStream: sends what the send queue takes, then the status. Runs on
 * one thread at a time: the loop (inline jobs) or the worker. */
static void pump(job *j) {
  for (;;) {
    pthread_mutex_lock(&mu);
    if (j->finished) {
      pthread_mutex_unlock(&mu);
      return;
    }
    if (j->next >= j->count) {
      pthread_mutex_unlock(&mu);
      break;
    }
    uint32_t seq = j->next;
    j->waiting = 0;
    sluice_server_call *call = j->call;
    pthread_mutex_unlock(&mu);
    Soak__Resp r;
    resp_init(&r, j, seq);
    int rc = sluice_server_call_send(call, &r.base);
    pthread_mutex_lock(&mu);
    if (rc == SLUICE_ERR_FULL) {
      j->waiting = 1;
      pthread_mutex_unlock(&mu);
      return;
    }
    if (rc == 0)
      j->next++;
    pthread_mutex_unlock(&mu);
    if (rc != 0) { /* the call is over: this finish is a no-op */
      finish(j, SLUICE_STATUS_CANCELLED, "soak: send failed", NULL);
      return;
    }
  }
  finish_asked(j, NULL);
}

/* The job's answer, on the loop or the worker: what the request asked. */
static void run(job *j) {
  Soak__Resp r;
  switch (j->method) {
  case M_UNARY:
    resp_init(&r, j, 0);
    finish_asked(j, &r);
    break;
  case M_SSTREAM:
    pump(j);
    break;
  case M_CSTREAM:
    pthread_mutex_lock(&mu);
    uint32_t got = j->received;
    pthread_mutex_unlock(&mu);
    resp_init(&r, j, got);
    finish_asked(j, &r);
    break;
  default: /* M_BIDI: at half-close */
    finish_asked(j, NULL);
    break;
  }
}

/* Queues j for the worker after delay_ms (mu held). */
static void enqueue_locked(job *j, uint32_t delay_ms) {
  if (j->queued || j->finished)
    return;
  j->queued = 1;
  j->refs++;
  j->due_ms = soak_now_ms() + delay_ms;
  j->qnext = queue;
  queue = j;
  pthread_cond_broadcast(&cv);
}

/* Answers now on this thread, or through the worker when the request asked
 * for a stall or another thread. The caller holds a reference. */
static void answer(job *j) {
  pthread_mutex_lock(&mu);
  int later = j->stall_ms > 0 || j->from_thread;
  if (later)
    enqueue_locked(j, j->stall_ms);
  pthread_mutex_unlock(&mu);
  if (!later)
    run(j);
}

static void *worker_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    uint64_t now = soak_now_ms(), next_due = UINT64_MAX;
    job **pp = &queue, *j = NULL;
    while (*pp) {
      if (stopping || (*pp)->due_ms <= now) {
        j = *pp;
        *pp = j->qnext;
        break;
      }
      if ((*pp)->due_ms < next_due)
        next_due = (*pp)->due_ms;
      pp = &(*pp)->qnext;
    }
    if (j) {
      j->queued = 0;
      j->running = 1;
      pthread_mutex_unlock(&mu);
      run(j);
      pthread_mutex_lock(&mu);
      j->running = 0;
      /* on_done came while it ran and left the finish to the worker (a
       * stream that stopped at a full send queue has not finished). */
      int orphan = j->done && !j->finished && !j->queued;
      if (orphan) {
        pthread_mutex_unlock(&mu);
        finish(j, SLUICE_STATUS_CANCELLED, "soak: call over", NULL);
        pthread_mutex_lock(&mu);
      }
      job_unref_locked(j); /* the queue's */
      continue;
    }
    if (stopping)
      break;
    struct timespec ts;
    soak_abs_ms(&ts, next_due == UINT64_MAX ? 1000 : next_due - now);
    pthread_cond_timedwait(&cv, &mu, &ts);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* ---- the call's callbacks (loop thread) */

static void on_message(sluice_server_call *call, const ProtobufCMessage *msg,
                       void *ud) {
  job *j = ud;
  const Soak__Req *r = (const Soak__Req *)msg;
  pthread_mutex_lock(&mu);
  if (j->finished) {
    pthread_mutex_unlock(&mu);
    return;
  }
  int first = !j->params;
  if (first)
    take_params(j, r);
  j->received++;
  uint32_t received = j->received;
  pthread_mutex_unlock(&mu);
  if (first)
    prepare(j, call);
  if (j->method != M_BIDI)
    return;
  Soak__Resp out;
  resp_init(&out, j, r->seq);
  int rc = sluice_server_call_send(call, &out.base);
  if (rc == SLUICE_ERR_FULL)
    finish(j, SLUICE_STATUS_RESOURCE_EXHAUSTED, "soak: echo queue full", NULL);
  else if (j->fail_code && received >= j->count)
    finish(j, (sluice_status_code)j->fail_code, "soak: asked to fail", NULL);
}

static void on_half_close(sluice_server_call *call, void *ud) {
  (void)call;
  job *j = ud;
  pthread_mutex_lock(&mu);
  int skip = j->finished;
  if (!j->params) /* no request at all: answer at once */
    j->stall_ms = 0, j->from_thread = 0;
  pthread_mutex_unlock(&mu);
  if (!skip)
    answer(j);
}

static void on_send_ready(sluice_server_call *call, void *ud) {
  (void)call;
  job *j = ud;
  pthread_mutex_lock(&mu);
  int inline_pump = j->waiting && !j->stall_ms && !j->from_thread;
  if (j->waiting && !inline_pump)
    enqueue_locked(j, 0);
  pthread_mutex_unlock(&mu);
  if (inline_pump)
    pump(j);
}

static void on_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)call;
  (void)cancelled;
  job *j = ud;
  pthread_mutex_lock(&mu);
  if (j->done)
    n_double_done++;
  j->done = 1;
  n_done++;
  /* Nobody else will finish it: not queued, not running on the worker
   * (which checks done when it returns), but maybe a stream waiting for
   * on_send_ready, which will not come now. */
  int orphan = !j->finished && !j->queued && !j->running;
  if (orphan)
    j->refs++;
  pthread_mutex_unlock(&mu);
  if (orphan) {
    finish(j, SLUICE_STATUS_CANCELLED, "soak: call over", NULL);
    job_unref(j);
  }
  job_unref(j); /* on_done's */
}

static const sluice_server_call_handlers handlers = {on_message, on_half_close,
                                                     on_send_ready, on_done};

/* Every handler: a job with the call's and on_done's references. */
static void start(sluice_server_call *call, const Soak__Req *req, int method) {
  job *j = calloc(1, sizeof *j);
  if (!j) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "soak: out of memory", NULL);
    return;
  }
  j->call = call;
  j->method = method;
  j->refs = 3; /* the call's, on_done's, this function's */
  pthread_mutex_lock(&mu);
  n_jobs++;
  if (req)
    take_params(j, req);
  pthread_mutex_unlock(&mu);
  if (sluice_server_call_set_handlers(call, &handlers, j) != 0) {
    pthread_mutex_lock(&mu);
    j->done = 1; /* no on_done will come */
    n_done++;
    j->refs--;
    pthread_mutex_unlock(&mu);
    finish(j, SLUICE_STATUS_INTERNAL, "soak: set_handlers failed", NULL);
    job_unref(j);
    return;
  }
  pthread_mutex_lock(&mu);
  int over = j->finished;
  pthread_mutex_unlock(&mu);
  if (req && !over) {
    prepare(j, call);
    answer(j);
  }
  job_unref(j);
}

static void h_unary(sluice_server_call *call, const Soak__Req *req, void *ud) {
  (void)ud;
  start(call, req, M_UNARY);
}

static void h_sstream(sluice_server_call *call, const Soak__Req *req,
                      void *ud) {
  (void)ud;
  start(call, req, M_SSTREAM);
}

static void h_cstream(sluice_server_call *call, void *ud) {
  (void)ud;
  start(call, NULL, M_CSTREAM);
}

static void h_bidi(sluice_server_call *call, void *ud) {
  (void)ud;
  start(call, NULL, M_BIDI);
}

/* "drop": every connected stream socket of the process is shut down. The
 * library owns the descriptors; shutdown(2) leaves them open, so the
 * library sees the connection end (EOF, errors) and closes them itself.
 * A descriptor that was closed and reused meanwhile is at worst another
 * connection, which is what is dropped anyway. */
/* Every connection this server holds. */
static unsigned drop_connections(void) {
  return soak_shutdown_sockets(NULL, NULL);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: soak_server ADDRESS [MAX_AGE_MS [CERT KEY]]\n");
    return 64;
  }
  signal(SIGPIPE, SIG_IGN);
  uint64_t max_age = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
  for (size_t i = 0; i < sizeof payload; i++)
    payload[i] = (uint8_t)(i * 131u + 17u);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&cv, &ca);
  pthread_condattr_destroy(&ca);
  /* The baseline, after a loop has come and gone once: libuv keeps a
   * process-wide pipe from the first one on. */
  sluice_channel *warm;
  if (sluice_channel_new(&warm, "ipv4:127.0.0.1:1", NULL) != 0)
    return 1;
  sluice_channel_del(warm);
  int threads0 = soak_count_dir("/proc/self/task");
  int fds0 = soak_count_dir("/proc/self/fd");

  sluice_server_opts *o;
  sluice_server *srv;
  if (sluice_server_opts_new(&o) != 0)
    return 1;
  sluice_server_opts_set_threads(o, 2);
  /* The driver's keepalive channels PING every second. */
  sluice_server_opts_set_keepalive_enforcement(o, 500, 1, 0);
  /* Admission: some calls queue, a few are refused. */
  sluice_server_opts_set_max_concurrent_calls(o, 48);
  sluice_server_opts_set_max_queue(o, 32);
  if (max_age)
    sluice_server_opts_set_connection_limits(o, 0, max_age, 2000);
  if (argc > 4) {
    sluice_tls_server_config tc;
    sluice_tls_server_config_init(&tc);
    tc.cert.file = argv[3];
    tc.key.file = argv[4];
    if (sluice_server_opts_set_tls(o, &tc) != 0) {
      fprintf(stderr, "soak_server: TLS: %s\n",
              sluice_server_opts_last_error(o));
      sluice_server_opts_del(o);
      return 1;
    }
  }
  int rc = sluice_server_new(&srv, o);
  sluice_server_opts_del(o);
  if (rc != 0)
    return 1;
  Soak__Soak_SluiceHandlers h = {.unary = h_unary,
                                 .server_stream = h_sstream,
                                 .client_stream = h_cstream,
                                 .bidi = h_bidi};
  if (soak__soak__sluice_register(srv, &h, NULL) != 0)
    return 1;
  if (sluice_server_listen(srv, argv[1], NULL) != 0) {
    sluice_server_del(srv);
    return 2;
  }
  pthread_t worker;
  if (pthread_create(&worker, NULL, worker_main, NULL) != 0 ||
      sluice_server_start(srv) != 0)
    return 1;
  printf("ready\n");
  fflush(stdout);

  char line[64];
  while (fgets(line, sizeof line, stdin) != NULL) {
    if (strncmp(line, "drop", 4) == 0) {
      unsigned n = drop_connections();
      pthread_mutex_lock(&mu);
      n_drops += n;
      pthread_mutex_unlock(&mu);
    }
  }

  sluice_server_shutdown(srv, 1000);
  pthread_mutex_lock(&mu);
  stopping = 1; /* the worker runs what is queued now, then ends */
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(worker, NULL);
  sluice_server_del(srv);

  int threads1 = soak_count_dir("/proc/self/task");
  int fds1 = soak_count_dir("/proc/self/fd");
  pthread_mutex_lock(&mu);
  int bad = n_freed != n_jobs || n_done != n_jobs || n_finished != n_jobs ||
            n_double_done != 0 || threads1 != threads0 || fds1 != fds0;
  fprintf(stderr,
          "soak_server %s: calls %llu on_done %llu finished %llu freed %llu "
          "double on_done %llu finish errors %llu dropped sockets %llu "
          "threads %d -> %d fds %d -> %d%s\n",
          argv[1], (unsigned long long)n_jobs, (unsigned long long)n_done,
          (unsigned long long)n_finished, (unsigned long long)n_freed,
          (unsigned long long)n_double_done, (unsigned long long)n_finish_err,
          (unsigned long long)n_drops, threads0, threads1, fds0, fds1,
          bad ? "  <-- MISMATCH" : "");
  pthread_mutex_unlock(&mu);
  pthread_cond_destroy(&cv);
  return bad ? 1 : 0;
}
