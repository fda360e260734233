/* ticker_server: serves streaming_demo.Ticker (route.proto).
 *
 *   ticker_server --port N [--threads T]
 *
 *  - Countdown (server streaming): sends from, from-1, ..., 1 with
 *    interval_ms between them. A worker thread per call does the waiting,
 *    so that no loop thread ever sleeps; it stops when the call ends.
 *  - Sum (client streaming): adds the numbers as they come (on_message) and
 *    replies once the client half-closes (on_half_close).
 *  - Chat (bidirectional): sends every note back as "echo: <text>". When the
 *    send queue is full it pauses receiving until on_send_ready.
 *
 * Prints "listening on <port>" on stdout once it accepts (port 0 picks a free
 * one). SIGINT or SIGTERM shut it down gracefully.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "route.sluice.h"
#include "serve.h"

#define SHUTDOWN_GRACE_MS 2000
#define STOP_WAIT_MS 5000      /* for the workers, after the shutdown */
#define MAX_INTERVAL_MS 60000u /* longer pauses are cut to this */

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

/* ---- Countdown: a worker thread per call
 *
 * One mutex and one condition variable for every countdown keep the example
 * short (a busy server would give each call its own). The state is freed
 * when both the worker and on_done have let go of it. */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv; /* CLOCK_MONOTONIC, set up in main */
static unsigned workers;  /* worker threads still running */
static int stopping;      /* the server has shut down: workers stop */

typedef struct countdown {
  sluice_server_call *call;
  uint32_t from, interval_ms;
  unsigned ready_gen; /* bumped by on_send_ready */
  int over;           /* on_done fired: the stream is gone */
  int refs;           /* the worker's and on_done's */
} countdown;

/* All of these run with mu held. */

static int countdown_stop(const countdown *c) { return c->over || stopping; }

static void countdown_unref(countdown *c) {
  if (--c->refs == 0)
    free(c);
}

/* Sends one tick; while the send queue is full, waits for on_send_ready.
 * Returns 0 or the SLUICE_ERR_* of the send (SLUICE_ERR_STATE: call over). */
static int send_tick(countdown *c, uint32_t value) {
  StreamingDemo__Tick tick = STREAMING_DEMO__TICK__INIT;
  tick.value = value;
  for (;;) {
    if (countdown_stop(c))
      return SLUICE_ERR_STATE;
    unsigned gen = c->ready_gen;
    pthread_mutex_unlock(&mu);
    int rc = streaming_demo__ticker__countdown__send_response(c->call, &tick);
    pthread_mutex_lock(&mu);
    if (rc != SLUICE_ERR_FULL)
      return rc;
    while (c->ready_gen == gen && !countdown_stop(c))
      pthread_cond_wait(&cv, &mu);
  }
}

/* Waits ms milliseconds, or less if the call ends. Returns 0, or -1 when the
 * call is over. */
static int pause_ms(countdown *c, unsigned ms) {
  struct timespec until = deadline_in_ms(ms);
  int rc = 0;
  while (!countdown_stop(c) && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&cv, &mu, &until);
  return countdown_stop(c) ? -1 : 0;
}

static void *countdown_main(void *arg) {
  countdown *c = arg;
  sluice_status_code code = SLUICE_STATUS_OK;
  const char *why = NULL;

  pthread_mutex_lock(&mu);
  for (uint32_t v = c->from; v > 0; v--) {
    int rc = send_tick(c, v);
    if (rc == 0 && v > 1 && pause_ms(c, c->interval_ms) != 0)
      rc = SLUICE_ERR_STATE;
    if (rc != 0) { /* a call that is over is not answered again */
      code = rc == SLUICE_ERR_STATE ? SLUICE_STATUS_CANCELLED
                                    : SLUICE_STATUS_INTERNAL;
      why = sluice_strerror(rc);
      break;
    }
  }
  pthread_mutex_unlock(&mu);

  /* OK with no message: the ticks were the response. */
  sluice_server_call_finish(c->call, code, why, NULL);

  pthread_mutex_lock(&mu);
  countdown_unref(c);
  workers--;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void countdown_on_send_ready(sluice_server_call *call, void *user_data) {
  (void)call;
  countdown *c = user_data;
  pthread_mutex_lock(&mu);
  c->ready_gen++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

static void countdown_on_done(sluice_server_call *call, int cancelled,
                              void *user_data) {
  (void)call;
  countdown *c = user_data;
  if (cancelled)
    fprintf(stderr, "ticker_server: a countdown was cancelled\n");
  pthread_mutex_lock(&mu);
  c->over = 1;
  pthread_cond_broadcast(&cv);
  countdown_unref(c);
  pthread_mutex_unlock(&mu);
}

static void countdown_handler(sluice_server_call *call,
                              const StreamingDemo__CountdownRequest *req,
                              void *user_data) {
  (void)user_data;
  countdown *c = calloc(1, sizeof *c);
  if (c == NULL) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  c->call = call;
  c->from = req->from;
  c->interval_ms =
      req->interval_ms < MAX_INTERVAL_MS ? req->interval_ms : MAX_INTERVAL_MS;
  c->refs = 2;

  const StreamingDemo__Ticker__Countdown_ServerHandlers h = {
      .on_send_ready = countdown_on_send_ready,
      .on_done = countdown_on_done,
  };
  if (streaming_demo__ticker__countdown__set_handlers(call, &h, c) != 0) {
    free(c); /* no handlers, no on_done */
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL,
                              "cannot set the call's handlers", NULL);
    return;
  }

  pthread_attr_t attr;
  pthread_t tid;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&mu);
  int rc = pthread_create(&tid, &attr, countdown_main, c);
  if (rc == 0)
    workers++;
  else
    countdown_unref(c); /* the worker's reference; on_done drops the other */
  pthread_mutex_unlock(&mu);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot start a thread", NULL);
}

/* Tells the workers to stop and waits (bounded) until they have. Returns 0,
 * or -1 when some are still running. */
static int stop_workers(void) {
  struct timespec until = deadline_in_ms(STOP_WAIT_MS);
  int rc = 0;
  pthread_mutex_lock(&mu);
  stopping = 1;
  pthread_cond_broadcast(&cv);
  while (workers > 0 && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&cv, &mu, &until);
  unsigned left = workers;
  pthread_mutex_unlock(&mu);
  if (left > 0)
    fprintf(stderr, "ticker_server: %u countdown(s) still running\n", left);
  return left > 0 ? -1 : 0;
}

/* ---- Sum: everything on the call's loop thread, no locks */

typedef struct sum_state {
  int64_t sum;
  uint32_t count;
  int finished; /* finish was called */
} sum_state;

static void sum_on_message(sluice_server_call *call,
                           const StreamingDemo__Number *n, void *user_data) {
  sum_state *s = user_data;
  int64_t v = n->value;
  if (s->finished)
    return;
  if ((v > 0 && s->sum > INT64_MAX - v) || (v < 0 && s->sum < INT64_MIN - v)) {
    s->finished = 1;
    sluice_server_call_finish(call, SLUICE_STATUS_OUT_OF_RANGE,
                              "the sum overflows int64", NULL);
    return;
  }
  s->sum += v;
  s->count++;
}

static void sum_on_half_close(sluice_server_call *call, void *user_data) {
  sum_state *s = user_data;
  if (s->finished)
    return;
  s->finished = 1;
  StreamingDemo__Total total = STREAMING_DEMO__TOTAL__INIT;
  total.sum = s->sum;
  total.count = s->count;
  streaming_demo__ticker__sum__reply(call, &total);
}

static void sum_on_done(sluice_server_call *call, int cancelled,
                        void *user_data) {
  (void)cancelled;
  sum_state *s = user_data;
  if (!s->finished) /* the client went away: finish is then a no-op */
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(s);
}

static void sum_handler(sluice_server_call *call, void *user_data) {
  (void)user_data;
  sum_state *s = calloc(1, sizeof *s);
  const StreamingDemo__Ticker__Sum_ServerHandlers h = {
      .on_message = sum_on_message,
      .on_half_close = sum_on_half_close,
      .on_done = sum_on_done,
  };
  if (s == NULL ||
      streaming_demo__ticker__sum__set_handlers(call, &h, s) != 0) {
    free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot set up the call", NULL);
  }
}

/* ---- Chat: everything on the call's loop thread, no locks */

typedef struct chat_state {
  char *pending;   /* an echo the full send queue refused, or NULL */
  int half_closed; /* the client sends no more notes */
  int finished;    /* finish was called */
} chat_state;

static void chat_finish(chat_state *s, sluice_server_call *call,
                        sluice_status_code code, const char *message) {
  if (s->finished)
    return;
  s->finished = 1;
  sluice_server_call_finish(call, code, message, NULL);
}

/* Sends s->pending. Returns 1 when it is gone (sent, or the call failed),
 * 0 when the send queue is full: then s->pending is kept. */
static int chat_send_pending(chat_state *s, sluice_server_call *call) {
  StreamingDemo__Note note = STREAMING_DEMO__NOTE__INIT;
  note.text = s->pending;
  int rc = streaming_demo__ticker__chat__send_response(call, &note);
  if (rc == SLUICE_ERR_FULL)
    return 0;
  free(s->pending);
  s->pending = NULL;
  if (rc != 0)
    chat_finish(s, call, SLUICE_STATUS_INTERNAL, sluice_strerror(rc));
  else if (s->half_closed)
    chat_finish(s, call, SLUICE_STATUS_OK, NULL);
  return 1;
}

static void chat_on_message(sluice_server_call *call,
                            const StreamingDemo__Note *note, void *user_data) {
  chat_state *s = user_data;
  const char *text = note->text;
  if (s->finished)
    return;
  size_t len = strlen("echo: ") + strlen(text) + 1;
  if ((s->pending = malloc(len)) == NULL) {
    chat_finish(s, call, SLUICE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  snprintf(s->pending, len, "echo: %s", text);
  if (!chat_send_pending(s, call)) /* full: no more notes until it drains */
    sluice_server_call_set_recv_paused(call, 1);
}

static void chat_on_send_ready(sluice_server_call *call, void *user_data) {
  chat_state *s = user_data;
  if (s->pending != NULL && !s->finished && chat_send_pending(s, call))
    sluice_server_call_set_recv_paused(call, 0);
}

static void chat_on_half_close(sluice_server_call *call, void *user_data) {
  chat_state *s = user_data;
  s->half_closed = 1;
  if (s->pending == NULL) /* else once the last echo is queued */
    chat_finish(s, call, SLUICE_STATUS_OK, NULL);
}

static void chat_on_done(sluice_server_call *call, int cancelled,
                         void *user_data) {
  (void)cancelled;
  chat_state *s = user_data;
  chat_finish(s, call, SLUICE_STATUS_CANCELLED, NULL);
  free(s->pending);
  free(s);
}

static void chat_handler(sluice_server_call *call, void *user_data) {
  (void)user_data;
  chat_state *s = calloc(1, sizeof *s);
  const StreamingDemo__Ticker__Chat_ServerHandlers h = {
      .on_message = chat_on_message,
      .on_half_close = chat_on_half_close,
      .on_send_ready = chat_on_send_ready,
      .on_done = chat_on_done,
  };
  if (s == NULL ||
      streaming_demo__ticker__chat__set_handlers(call, &h, s) != 0) {
    free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot set up the call", NULL);
  }
}

/* ---- main */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --port N [--threads T]\n"
          "  --port N     port to listen on at 127.0.0.1 (0 picks a free one)\n"
          "  --threads T  server loop threads (default: one per core)\n",
          prog);
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  unsigned long port = 0, threads = 0;
  int have_port = 0;

  for (int i = 1; i < argc; i += 2) {
    const char *flag = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    int bad;
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    } else if (strcmp(flag, "--port") == 0) {
      bad = sluice_example_parse_ulong(val, 65535, &port);
      have_port = 1;
    } else if (strcmp(flag, "--threads") == 0) {
      bad = sluice_example_parse_ulong(val, 1024, &threads);
    } else {
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
  if (!have_port) {
    fprintf(stderr, "%s: --port is required\n", prog);
    usage(stderr, prog);
    return 2;
  }

  /* Before any thread exists (see serve.h). */
  sigset_t stop_signals;
  sluice_example_block_signals(&stop_signals);

  pthread_condattr_t cattr;
  pthread_condattr_init(&cattr);
  pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
  pthread_cond_init(&cv, &cattr);
  pthread_condattr_destroy(&cattr);

  char address[32];
  sluice_example_address(address, sizeof address, "127.0.0.1", port, prog);

  int exit_code = 1, rc;
  sluice_server_opts *opts = NULL;
  sluice_server *srv = NULL;
  const StreamingDemo__Ticker_SluiceHandlers handlers = {
      .countdown = countdown_handler,
      .sum = sum_handler,
      .chat = chat_handler,
  };

  if ((rc = sluice_server_opts_new(&opts)) != 0 ||
      (rc = sluice_server_opts_set_threads(opts, (unsigned)threads)) != 0 ||
      (rc = sluice_server_new(&srv, opts)) != 0 ||
      (rc = streaming_demo__ticker__sluice_register(srv, &handlers, NULL)) !=
          0) {
    fprintf(stderr, "%s: cannot create the server: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  /* Calls in flight get the grace period; after it every call is over
   * (on_done has fired), and the workers are told to stop. */
  exit_code = sluice_example_serve(srv, address, &stop_signals,
                                   SHUTDOWN_GRACE_MS, prog);

out:
  if (stop_workers() != 0)
    return 1; /* a worker may still use its call: do not free the server */
  sluice_server_del(srv);
  sluice_server_opts_del(opts);
  pthread_cond_destroy(&cv);
  return exit_code;
}
