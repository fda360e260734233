/* retry_server: retrytest.RetryTest (tests/interop/retrytest.proto) on the
 * sluice server API, the sluice counterpart of py_retry_server.py.
 *
 *   retry_server [--port N] [--threads T] [--max-concurrent-calls N]
 *                [--max-queue N]
 *
 * Each request (a Behavior) says how its attempt is answered; the server
 * records every attempt's grpc-previous-rpc-attempts, arrival time and
 * remaining deadline per key, and Report / Observe return that record.
 * --max-concurrent-calls and --max-queue set the admission limits
 * (sluice_server_opts_set_max_concurrent_calls / _set_max_queue), so that
 * the library's own RESOURCE_EXHAUSTED refusals with grpc-retry-pushback-ms
 * can be tested. Prints "listening on <port>" on stdout once it accepts
 * (port 0, the default, picks a free one); SIGINT or SIGTERM shut it down.
 *
 * What the API does not allow, and this server therefore cannot do:
 *  - commit a unary call before failing it: initial metadata added before
 *    an error finish goes out in the one Trailers-Only HEADERS frame, so
 *    "headers_then_fail" on Unary is not a commit (on Stream a message is
 *    sent first, and that commits).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sluice/sluice.h>

#include "retrytest.sluice.h"
#include "serve.h"

#define SHUTDOWN_GRACE_MS 1000
#define MAX_DELAY_MS 60000u
#define MAX_STREAM_MESSAGES 1000u
#define PUSHBACK_KEY "grpc-retry-pushback-ms"

/* ---- attempts per key */

typedef struct attempt {
  char prev[24]; /* grpc-previous-rpc-attempts ("" none) */
  double arrival_ms;
  int64_t timeout_ms;
} attempt;

typedef struct key_rec {
  struct key_rec *next;
  char *key;
  attempt *atts;
  size_t n, cap;
  char note[160]; /* reported with the key's next report */
} key_rec;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv; /* CLOCK_MONOTONIC, set up in main */
static key_rec *keys;
static unsigned workers; /* delay threads still running */
static int stopping;
static int pushback_warned;

static key_rec *find_key(const char *key) { /* mu held */
  for (key_rec *k = keys; k; k = k->next)
    if (strcmp(k->key, key) == 0)
      return k;
  key_rec *k = calloc(1, sizeof *k);
  if (!k)
    return NULL;
  k->key = strdup(key);
  if (!k->key) {
    free(k);
    return NULL;
  }
  k->next = keys;
  keys = k;
  return k;
}

/* Records an attempt of call for key; returns its number (1, 2 ...), 0 when
 * out of memory. */
static uint32_t arrive(sluice_server_call *call, const char *key) {
  uint64_t now = sluice_now_ns();
  attempt a;
  memset(&a, 0, sizeof a);
  a.arrival_ms = (double)now / 1e6;
  size_t len = 0;
  const char *prev = sluice_metadata_find(sluice_server_call_metadata(call),
                                          "grpc-previous-rpc-attempts", &len);
  if (prev)
    snprintf(a.prev, sizeof a.prev, "%.*s", (int)len, prev);
  uint64_t dl = sluice_server_call_deadline(call);
  a.timeout_ms = dl == 0 ? -1 : dl > now ? (int64_t)((dl - now) / 1000000u) : 0;

  uint32_t n = 0;
  pthread_mutex_lock(&mu);
  key_rec *k = find_key(key);
  if (k && k->n == k->cap) {
    size_t cap = k->cap ? k->cap * 2 : 8;
    attempt *p = realloc(k->atts, cap * sizeof *p);
    if (p) {
      k->atts = p;
      k->cap = cap;
    }
  }
  if (k && k->n < k->cap) {
    k->atts[k->n++] = a;
    n = (uint32_t)k->n;
  }
  pthread_mutex_unlock(&mu);
  return n;
}

static void set_note(const char *key, const char *note) {
  pthread_mutex_lock(&mu);
  key_rec *k = find_key(key);
  if (k)
    snprintf(k->note, sizeof k->note, "%s", note);
  pthread_mutex_unlock(&mu);
}

static char empty[] = "";

/* A report of key (a snapshot); free with report_free(). */
typedef struct report {
  Retrytest__Report msg;
  Retrytest__Attempt *atts;
  Retrytest__Attempt **ptrs;
  char *note;
} report;

static int report_make(report *r, const char *key, uint32_t seq) {
  memset(r, 0, sizeof *r);
  Retrytest__Report init = RETRYTEST__REPORT__INIT;
  r->msg = init;
  r->msg.key = (char *)key;
  r->msg.seq = seq;
  pthread_mutex_lock(&mu);
  key_rec *k = find_key(key);
  size_t n = k ? k->n : 0;
  r->atts = calloc(n ? n : 1, sizeof *r->atts);
  r->ptrs = calloc(n ? n : 1, sizeof *r->ptrs);
  r->note = strdup(k ? k->note : "");
  if (!r->atts || !r->ptrs || !r->note) {
    pthread_mutex_unlock(&mu);
    free(r->atts);
    free(r->ptrs);
    free(r->note);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    Retrytest__Attempt ai = RETRYTEST__ATTEMPT__INIT;
    r->atts[i] = ai;
    r->atts[i].previous_attempts = strdup(k->atts[i].prev);
    if (!r->atts[i].previous_attempts)
      r->atts[i].previous_attempts = empty;
    r->atts[i].arrival_ms = k->atts[i].arrival_ms;
    r->atts[i].timeout_ms = k->atts[i].timeout_ms;
    r->ptrs[i] = &r->atts[i];
  }
  pthread_mutex_unlock(&mu);
  r->msg.n_attempts = n;
  r->msg.attempts = r->ptrs;
  r->msg.note = r->note;
  return 0;
}

static void report_free(report *r) {
  for (size_t i = 0; i < r->msg.n_attempts; i++)
    if (r->atts[i].previous_attempts != empty)
      free(r->atts[i].previous_attempts);
  free(r->atts);
  free(r->ptrs);
  free(r->note);
}

/* ---- answering an attempt */

typedef struct job {
  sluice_server_call *call;
  const Retrytest__Behavior *b; /* borrowed until the call is finished */
  uint32_t n;                   /* the attempt's number */
  int streaming;
} job;

static int failing(const job *j) {
  return j->n == 0 || j->n <= j->b->fail_first;
}

static void fail(const job *j) {
  const Retrytest__Behavior *b = j->b;
  char msg[200];
  if (b->pushback && *b->pushback &&
      (b->pushback_attempts == 0 || j->n <= b->pushback_attempts)) {
    int rc = sluice_server_call_add_trailing_metadata(
        j->call, PUSHBACK_KEY, b->pushback, strlen(b->pushback));
    if (rc != 0) {
      char note[160];
      snprintf(note, sizeof note, "cannot send %s: %s", PUSHBACK_KEY,
               sluice_strerror(rc));
      set_note(b->key, note);
      pthread_mutex_lock(&mu);
      int warn = !pushback_warned;
      pushback_warned = 1;
      pthread_mutex_unlock(&mu);
      if (warn)
        fprintf(stderr, "retry_server: %s\n", note);
    }
  }
  snprintf(msg, sizeof msg, "attempt %u of '%s' fails", j->n, b->key);
  sluice_status_code code =
      b->code ? (sluice_status_code)b->code : SLUICE_STATUS_UNAVAILABLE;
  sluice_server_call_finish(j->call, code, msg, NULL);
}

static void answer(const job *j) {
  const Retrytest__Behavior *b = j->b;
  report r;
  if (failing(j)) {
    if (b->headers_then_fail) {
      sluice_server_call_add_initial_metadata(j->call, "x-committed", "1", 1);
      if (j->streaming && report_make(&r, b->key, 0) == 0) {
        r.msg.note = (char *)"sent before failing";
        retrytest__retry_test__stream__send_response(j->call, &r.msg);
        r.msg.note = r.note;
        report_free(&r);
      }
    }
    fail(j);
    return;
  }
  if (j->streaming) {
    uint32_t count = b->stream_messages ? b->stream_messages : 1;
    if (count > MAX_STREAM_MESSAGES)
      count = MAX_STREAM_MESSAGES;
    for (uint32_t i = 0; i < count; i++) {
      if (report_make(&r, b->key, i) != 0) {
        sluice_server_call_finish(j->call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                                  "out of memory", NULL);
        return;
      }
      int rc = retrytest__retry_test__stream__send_response(j->call, &r.msg);
      report_free(&r);
      if (rc != 0) { /* the few small reports fit the send queue */
        sluice_server_call_finish(j->call, SLUICE_STATUS_INTERNAL,
                                  sluice_strerror(rc), NULL);
        return;
      }
    }
    sluice_server_call_finish(j->call, SLUICE_STATUS_OK, NULL, NULL);
    return;
  }
  if (report_make(&r, b->key, 0) != 0) {
    sluice_server_call_finish(j->call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  retrytest__retry_test__unary__reply(j->call, &r.msg);
  report_free(&r);
}

static struct timespec deadline_in_ms(unsigned ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* A delayed attempt waits on its own thread: loop threads never sleep. */
static void *delay_main(void *arg) {
  job *j = arg;
  unsigned ms = j->b->delay_ms > MAX_DELAY_MS ? MAX_DELAY_MS : j->b->delay_ms;
  struct timespec until = deadline_in_ms(ms);
  pthread_mutex_lock(&mu);
  int rc = 0;
  while (!stopping && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&cv, &mu, &until);
  pthread_mutex_unlock(&mu);
  answer(j); /* after shutdown the library ignores it, as documented */
  free(j);
  pthread_mutex_lock(&mu);
  workers--;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void start(sluice_server_call *call, const Retrytest__Behavior *b,
                  int streaming) {
  job now = {call, b, arrive(call, b->key), streaming};
  if (!b->delay_ms) {
    answer(&now);
    return;
  }
  job *j = malloc(sizeof *j);
  pthread_t th;
  pthread_attr_t attr;
  if (!j) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  *j = now;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&mu);
  workers++;
  pthread_mutex_unlock(&mu);
  if (pthread_create(&th, &attr, delay_main, j) != 0) {
    pthread_mutex_lock(&mu);
    workers--;
    pthread_mutex_unlock(&mu);
    free(j);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot start a thread", NULL);
  }
  pthread_attr_destroy(&attr);
}

static void on_unary(sluice_server_call *call, const Retrytest__Behavior *req,
                     void *user_data) {
  (void)user_data;
  start(call, req, 0);
}

static void on_stream(sluice_server_call *call, const Retrytest__Behavior *req,
                      void *user_data) {
  (void)user_data;
  start(call, req, 1);
}

static void on_observe(sluice_server_call *call,
                       const Retrytest__ObserveRequest *req, void *user_data) {
  (void)user_data;
  report r;
  if (report_make(&r, req->key, 0) != 0) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  retrytest__retry_test__observe__reply(call, &r.msg);
  report_free(&r);
}

static int usage(void) {
  fprintf(stderr, "usage: retry_server [--port N] [--threads T] "
                  "[--max-concurrent-calls N] [--max-queue N]\n");
  return 2;
}

int main(int argc, char **argv) {
  unsigned long port = 0, threads = 0, max_calls = 0, max_queue = 1000;
  int set_queue = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    unsigned long *dst = NULL, max = 0;
    if (strcmp(argv[i], "--port") == 0)
      dst = &port, max = 65535;
    else if (strcmp(argv[i], "--threads") == 0)
      dst = &threads, max = 1024;
    else if (strcmp(argv[i], "--max-concurrent-calls") == 0)
      dst = &max_calls, max = INT32_MAX;
    else if (strcmp(argv[i], "--max-queue") == 0)
      dst = &max_queue, max = INT32_MAX, set_queue = 1;
    else
      return usage();
    if (sluice_example_parse_ulong(v, max, dst) != 0)
      return usage();
    i++;
  }

  sigset_t stop_signals;
  sluice_example_block_signals(&stop_signals);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&cv, &ca);
  pthread_condattr_destroy(&ca);

  sluice_server_opts *o;
  sluice_server *srv;
  if (sluice_server_opts_new(&o) != 0)
    return 1;
  if ((threads && sluice_server_opts_set_threads(o, (unsigned)threads) != 0) ||
      (max_calls &&
       sluice_server_opts_set_max_concurrent_calls(o, (uint32_t)max_calls)) ||
      (set_queue && sluice_server_opts_set_max_queue(o, (uint32_t)max_queue))) {
    fprintf(stderr, "retry_server: bad option\n");
    return 2;
  }
  int rc = sluice_server_new(&srv, o);
  sluice_server_opts_del(o);
  if (rc != 0)
    return 1;
  Retrytest__RetryTest_SluiceHandlers h = {
      .unary = on_unary, .stream = on_stream, .observe = on_observe};
  if (retrytest__retry_test__sluice_register(srv, &h, NULL) != 0)
    return 1;
  char address[300];
  if (sluice_example_address(address, sizeof address, "127.0.0.1", port,
                             "retry_server") != 0)
    return 1;
  rc = sluice_example_serve(srv, address, &stop_signals, SHUTDOWN_GRACE_MS,
                            "retry_server");

  /* The delay threads wake up, answer (a no-op now) and leave; the server
   * is freed after them. */
  pthread_mutex_lock(&mu);
  stopping = 1;
  pthread_cond_broadcast(&cv);
  struct timespec until = deadline_in_ms(10000);
  while (workers > 0)
    if (pthread_cond_timedwait(&cv, &mu, &until) == ETIMEDOUT)
      break;
  unsigned left = workers;
  pthread_mutex_unlock(&mu);
  if (left) {
    fprintf(stderr, "retry_server: %u delay threads did not stop\n", left);
    _exit(rc ? rc : 1);
  }
  sluice_server_del(srv);
  while (keys) {
    key_rec *k = keys;
    keys = k->next;
    free(k->key);
    free(k->atts);
    free(k);
  }
  return rc;
}
