/* interop_server: grpc.testing.TestService for gRPC's interop suite.
 *
 *   interop_server --port N [--host H] [--threads T]
 *                  [--use_tls --tls_cert FILE --tls_key FILE
 *                   [--tls_client_ca FILE [--require_client_cert]]]
 *
 * Implements the "Server" section of gRPC's doc/interop-test-descriptions.md:
 * EmptyCall, UnaryCall, CacheableUnaryCall (answered like UnaryCall),
 * StreamingOutputCall, StreamingInputCall, FullDuplexCall and HalfDuplexCall.
 * UnimplementedCall has no handler, so the generated dispatch answers
 * UNIMPLEMENTED; grpc.testing.UnimplementedService is not registered.
 *
 * Every method honours:
 *  - Echo Metadata: x-grpc-test-echo-initial from the request goes back as
 *    initial metadata, x-grpc-test-echo-trailing-bin as trailing metadata;
 *  - Echo Status: response_status (code != 0) ends the call with that code
 *    and message, after the responses asked for by the same request;
 *  - compression: expect_compressed true on a request that arrived
 *    uncompressed fails with INVALID_ARGUMENT; response_compressed /
 *    ResponseParameters.compressed turn gzip on for the call, and the
 *    responses that must not be compressed go with SLUICE_SEND_NO_COMPRESS.
 *
 * Streaming responses are produced by one worker thread per call, so that
 * interval_us never blocks a loop thread: it sleeps on a condition variable
 * (woken when the call ends or the server stops), sends, and waits for
 * on_send_ready when the call's send queue is full.
 *
 * --use_tls (gRPC's flag; --use_tls=false is plaintext, the default)
 * accepts TLS only, with the certificate chain and key of --tls_cert and
 * --tls_key (PEM files). --tls_client_ca asks clients for a certificate
 * chaining to those CAs (and checks one if sent); --require_client_cert
 * refuses clients without one (mutual TLS). Credentials that cannot be
 * loaded are reported and exit 2, like a bad flag.
 *
 * Prints "listening on <port>" on stdout once it accepts (port 0 picks a
 * free one). SIGINT or SIGTERM shut it down gracefully.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "grpc/testing/test.sluice.h"
#include "serve.h"

#define DEFAULT_PORT 10000
#define SHUTDOWN_GRACE_MS 2000
/* Workers still holding calls after the shutdown get this long to let go. */
#define STOP_WAIT_MS 10000
/* A full send queue with no on_send_ready for this long is reported. */
#define SEND_READY_WARN_MS 10000
#define MAX_PAYLOAD (64 * 1024 * 1024)     /* refuse absurd response sizes */
#define MAX_INTERVAL_US (60 * 1000 * 1000) /* and absurd sleeps */

static const char ECHO_INITIAL[] = "x-grpc-test-echo-initial";
static const char ECHO_TRAILING[] = "x-grpc-test-echo-trailing-bin";

/* ---- small helpers */

static struct timespec deadline_in_us(uint64_t us) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(us / 1000000u);
  ts.tv_nsec += (long)(us % 1000000u) * 1000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static void cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t cattr;
  pthread_condattr_init(&cattr);
  pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &cattr);
  pthread_condattr_destroy(&cattr);
}

/* A status code from an EchoStatus number (UNKNOWN outside 0..16). */
static sluice_status_code echo_code(int32_t code) {
  return code >= 0 && code <= 16 ? (sluice_status_code)code
                                 : SLUICE_STATUS_UNKNOWN;
}

static int wants(const Grpc__Testing__BoolValue *b) {
  return b != NULL && b->value;
}

/* Echo Metadata: copies the two echo keys, when the request has them, to
 * the response's initial and trailing metadata. */
static void echo_metadata(sluice_server_call *call) {
  const sluice_metadata *md = sluice_server_call_metadata(call);
  size_t len;
  const char *v = sluice_metadata_find(md, ECHO_INITIAL, &len);
  if (v != NULL)
    sluice_server_call_add_initial_metadata(call, ECHO_INITIAL, v, len);
  v = sluice_metadata_find(md, ECHO_TRAILING, &len);
  if (v != NULL)
    sluice_server_call_add_trailing_metadata(call, ECHO_TRAILING, v, len);
}

/* Checks a requested payload. Returns NULL when fine, else why not. */
static const char *check_payload_request(Grpc__Testing__PayloadType type,
                                         int32_t size) {
  if (type != GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE)
    return "unsupported response_type";
  if (size < 0 || size > MAX_PAYLOAD)
    return "bad response size";
  return NULL;
}

/* ---- unary methods (answered on the loop thread) */

static void empty_call(sluice_server_call *call,
                       const Grpc__Testing__Empty *req, void *user_data) {
  (void)req;
  (void)user_data;
  echo_metadata(call);
  Grpc__Testing__Empty resp = GRPC__TESTING__EMPTY__INIT;
  grpc__testing__test_service__empty_call__reply(call, &resp);
}

/* UnaryCall and CacheableUnaryCall. */
static void unary_call(sluice_server_call *call,
                       const Grpc__Testing__SimpleRequest *req,
                       void *user_data) {
  (void)user_data;
  echo_metadata(call);
  if (wants(req->expect_compressed) &&
      !sluice_server_call_message_compressed(call)) {
    sluice_server_call_finish(call, SLUICE_STATUS_INVALID_ARGUMENT,
                              "expected a compressed request", NULL);
    return;
  }
  if (req->response_status != NULL && req->response_status->code != 0) {
    sluice_server_call_finish(call, echo_code(req->response_status->code),
                              req->response_status->message, NULL);
    return;
  }
  const char *bad =
      check_payload_request(req->response_type, req->response_size);
  if (bad != NULL) {
    sluice_server_call_finish(call, SLUICE_STATUS_INVALID_ARGUMENT, bad, NULL);
    return;
  }
  if (wants(req->response_compressed))
    sluice_server_call_set_compression(call, SLUICE_COMPRESS_GZIP);

  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  Grpc__Testing__SimpleResponse resp = GRPC__TESTING__SIMPLE_RESPONSE__INIT;
  payload.type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  payload.body.len = (size_t)req->response_size;
  if (payload.body.len > 0) {
    payload.body.data = calloc(1, payload.body.len);
    if (payload.body.data == NULL) {
      sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                                "out of memory", NULL);
      return;
    }
  }
  resp.payload = &payload;
  sluice_server_call_reply(call, &resp.base);
  free(payload.body.data);
}

/* ---- StreamingInputCall (everything on the call's loop thread) */

typedef struct input_state {
  int64_t total;
  int finished; /* finish was called */
} input_state;

static void input_on_message(sluice_server_call *call,
                             const ProtobufCMessage *msg, void *user_data) {
  input_state *in = user_data;
  const Grpc__Testing__StreamingInputCallRequest *req =
      (const Grpc__Testing__StreamingInputCallRequest *)msg;
  if (in->finished)
    return;
  if (wants(req->expect_compressed) &&
      !sluice_server_call_message_compressed(call)) {
    in->finished = 1;
    sluice_server_call_finish(call, SLUICE_STATUS_INVALID_ARGUMENT,
                              "expected a compressed request", NULL);
    return;
  }
  if (req->payload != NULL)
    in->total += (int64_t)req->payload->body.len;
}

static void input_on_half_close(sluice_server_call *call, void *user_data) {
  input_state *in = user_data;
  if (in->finished)
    return;
  in->finished = 1;
  if (in->total > INT32_MAX) {
    sluice_server_call_finish(call, SLUICE_STATUS_OUT_OF_RANGE,
                              "aggregated payload size over 2^31-1", NULL);
    return;
  }
  Grpc__Testing__StreamingInputCallResponse resp =
      GRPC__TESTING__STREAMING_INPUT_CALL_RESPONSE__INIT;
  resp.aggregated_payload_size = (int32_t)in->total;
  grpc__testing__test_service__streaming_input_call__reply(call, &resp);
}

static void input_on_done(sluice_server_call *call, int cancelled,
                          void *user_data) {
  (void)cancelled;
  input_state *in = user_data;
  if (!in->finished) /* cancelled: the library answered, finish is a no-op */
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(in);
}

static void streaming_input_call(sluice_server_call *call, void *user_data) {
  (void)user_data;
  echo_metadata(call);
  input_state *in = calloc(1, sizeof *in);
  if (in == NULL) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  const sluice_server_call_handlers h = {.on_message = input_on_message,
                                         .on_half_close = input_on_half_close,
                                         .on_done = input_on_done};
  if (sluice_server_call_set_handlers(call, &h, in) != 0) {
    free(in);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL,
                              "cannot set the call's handlers", NULL);
  }
}

/* ---- streaming responses: a worker thread per call
 *
 * A job is what one StreamingOutputCallRequest asks for: its responses, and
 * the status to end the call with afterwards (Echo Status), if any. The
 * loop thread queues jobs (on_message) and marks the half close; the
 * worker runs them in order and finishes the call. The state is freed when
 * both the worker and on_done have let go of it. */

typedef struct resp_param {
  int32_t size;
  int32_t interval_us;
  int compressed;
} resp_param;

typedef struct job {
  struct job *next;
  size_t n;
  resp_param *params;
  sluice_status_code code; /* != OK: end the call with it after params */
  char *message;
} job;

typedef struct stream_state {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  sluice_server_call *call;
  int refs;           /* the worker's and on_done's */
  job *head, *tail;   /* not yet run */
  int hold;           /* HalfDuplexCall: run nothing before half close */
  int half_closed;    /* no more jobs will come */
  int cancelled;      /* on_done fired, or the server is stopping */
  int gzip_set;       /* set_compression was tried */
  unsigned ready_gen; /* bumped by on_send_ready */
  struct stream_state *prev, *next; /* all live states, under live_mu */
} stream_state;

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_cv; /* CLOCK_MONOTONIC, set up in main */
static stream_state *live;     /* every stream_state not yet freed */
static unsigned n_live;

static void job_free(job *j) {
  if (j == NULL)
    return;
  free(j->params);
  free(j->message);
  free(j);
}

/* The job of one request; NULL when out of memory. A bad request becomes a
 * job that only ends the call with INVALID_ARGUMENT. */
static job *job_from(const Grpc__Testing__StreamingOutputCallRequest *req) {
  job *j = calloc(1, sizeof *j);
  if (j == NULL)
    return NULL;
  const char *bad = NULL;
  for (size_t i = 0; i < req->n_response_parameters && bad == NULL; i++)
    bad = check_payload_request(req->response_type,
                                req->response_parameters[i]->size);
  if (bad != NULL) {
    j->code = SLUICE_STATUS_INVALID_ARGUMENT;
    j->message = strdup(bad);
    if (j->message == NULL)
      goto oom;
    return j;
  }
  if (req->n_response_parameters > 0) {
    j->params = calloc(req->n_response_parameters, sizeof *j->params);
    if (j->params == NULL)
      goto oom;
    j->n = req->n_response_parameters;
  }
  for (size_t i = 0; i < j->n; i++) {
    const Grpc__Testing__ResponseParameters *p = req->response_parameters[i];
    j->params[i].size = p->size;
    j->params[i].interval_us = p->interval_us < 0 ? 0
                               : p->interval_us > MAX_INTERVAL_US
                                   ? MAX_INTERVAL_US
                                   : p->interval_us;
    j->params[i].compressed = wants(p->compressed);
  }
  if (req->response_status != NULL && req->response_status->code != 0) {
    j->code = echo_code(req->response_status->code);
    j->message = strdup(req->response_status->message != NULL
                            ? req->response_status->message
                            : "");
    if (j->message == NULL)
      goto oom;
  }
  return j;
oom:
  job_free(j);
  return NULL;
}

static int job_wants_gzip(const job *j) {
  for (size_t i = 0; i < j->n; i++)
    if (j->params[i].compressed)
      return 1;
  return 0;
}

static stream_state *stream_new(sluice_server_call *call, int hold) {
  stream_state *s = calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  pthread_mutex_init(&s->mu, NULL);
  cond_init_monotonic(&s->cv);
  s->call = call;
  s->hold = hold;
  s->refs = 2;
  pthread_mutex_lock(&live_mu);
  s->next = live;
  if (live != NULL)
    live->prev = s;
  live = s;
  n_live++;
  pthread_mutex_unlock(&live_mu);
  return s;
}

static void stream_free(stream_state *s) {
  pthread_mutex_lock(&live_mu);
  if (s->prev != NULL)
    s->prev->next = s->next;
  else
    live = s->next;
  if (s->next != NULL)
    s->next->prev = s->prev;
  n_live--;
  pthread_cond_broadcast(&live_cv);
  pthread_mutex_unlock(&live_mu);
  while (s->head != NULL) {
    job *j = s->head;
    s->head = j->next;
    job_free(j);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

static void stream_unref(stream_state *s) {
  pthread_mutex_lock(&s->mu);
  int last = --s->refs == 0;
  pthread_mutex_unlock(&s->mu);
  if (last)
    stream_free(s);
}

/* Queues a job (loop thread). Turns gzip on for the call the first time a
 * job asks for a compressed response: too late once the response headers
 * went out (then those responses go uncompressed). */
static void stream_push(stream_state *s, job *j) {
  int gzip = 0;
  pthread_mutex_lock(&s->mu);
  if (!s->gzip_set && job_wants_gzip(j))
    gzip = s->gzip_set = 1;
  if (s->tail != NULL)
    s->tail->next = j;
  else
    s->head = j;
  s->tail = j;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (gzip)
    sluice_server_call_set_compression(s->call, SLUICE_COMPRESS_GZIP);
}

/* Sends one response of size zero bytes, waiting through a full send
 * queue. Returns 0, or -1 when the call is over (or a send failed: *code
 * and *why say how to finish). */
static int send_response(stream_state *s, const resp_param *p,
                         sluice_status_code *code, const char **why) {
  Grpc__Testing__Payload payload = GRPC__TESTING__PAYLOAD__INIT;
  Grpc__Testing__StreamingOutputCallResponse resp =
      GRPC__TESTING__STREAMING_OUTPUT_CALL_RESPONSE__INIT;
  payload.type = GRPC__TESTING__PAYLOAD_TYPE__COMPRESSABLE;
  payload.body.len = (size_t)p->size;
  if (payload.body.len > 0) {
    payload.body.data = calloc(1, payload.body.len);
    if (payload.body.data == NULL) {
      *code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      *why = "out of memory";
      return -1;
    }
  }
  resp.payload = &payload;
  /* Compressed or not is chosen per message: the call compresses once gzip
   * is on, and the responses that must not be compressed opt out. */
  unsigned flags = p->compressed ? 0 : SLUICE_SEND_NO_COMPRESS;
  int rc;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    unsigned gen = s->ready_gen;
    int over = s->cancelled;
    pthread_mutex_unlock(&s->mu);
    if (over) {
      rc = SLUICE_ERR_STATE;
      break;
    }
    rc = sluice_server_call_send_ex(s->call, &resp.base, flags);
    if (rc != SLUICE_ERR_FULL)
      break;
    pthread_mutex_lock(&s->mu);
    struct timespec warn_at = deadline_in_us(SEND_READY_WARN_MS * 1000ull);
    int wrc = 0;
    while (s->ready_gen == gen && !s->cancelled) {
      wrc = pthread_cond_timedwait(&s->cv, &s->mu, &warn_at);
      if (wrc == ETIMEDOUT) {
        fprintf(stderr,
                "interop_server: send queue full and no on_send_ready "
                "for %d ms\n",
                SEND_READY_WARN_MS);
        warn_at = deadline_in_us(SEND_READY_WARN_MS * 1000ull);
      }
    }
    pthread_mutex_unlock(&s->mu);
  }
  free(payload.body.data);
  if (rc == 0)
    return 0;
  if (rc == SLUICE_ERR_STATE) { /* cancelled: finish is a no-op */
    *code = SLUICE_STATUS_CANCELLED;
    *why = NULL;
  } else {
    *code = SLUICE_STATUS_INTERNAL;
    *why = sluice_strerror(rc);
  }
  return -1;
}

/* Sleeps us microseconds unless the call ends first. Returns 0, or -1 when
 * the call is over. */
static int stream_sleep(stream_state *s, int32_t us) {
  int over;
  pthread_mutex_lock(&s->mu);
  if (us > 0) {
    struct timespec until = deadline_in_us((uint64_t)us);
    int rc = 0;
    while (!s->cancelled && rc != ETIMEDOUT)
      rc = pthread_cond_timedwait(&s->cv, &s->mu, &until);
  }
  over = s->cancelled;
  pthread_mutex_unlock(&s->mu);
  return over ? -1 : 0;
}

static void *stream_worker(void *arg) {
  stream_state *s = arg;
  sluice_status_code code = SLUICE_STATUS_OK;
  char *message = NULL;
  const char *why = NULL;

  pthread_mutex_lock(&s->mu);
  for (;;) {
    if (s->cancelled) {
      code = SLUICE_STATUS_CANCELLED;
      break;
    }
    if (s->head != NULL && (!s->hold || s->half_closed)) {
      job *j = s->head;
      s->head = j->next;
      if (s->head == NULL)
        s->tail = NULL;
      pthread_mutex_unlock(&s->mu);
      int stop = 0;
      for (size_t i = 0; i < j->n && !stop; i++) {
        if (stream_sleep(s, j->params[i].interval_us) != 0) {
          code = SLUICE_STATUS_CANCELLED;
          stop = 1;
        } else {
          stop = send_response(s, &j->params[i], &code, &why) != 0;
        }
      }
      if (!stop && j->code != SLUICE_STATUS_OK) {
        code = j->code; /* Echo Status: later requests are not read */
        message = j->message;
        j->message = NULL;
        stop = 1;
      }
      job_free(j);
      pthread_mutex_lock(&s->mu);
      if (stop)
        break;
      continue;
    }
    if (s->half_closed && s->head == NULL) {
      code = SLUICE_STATUS_OK;
      break;
    }
    pthread_cond_wait(&s->cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);

  sluice_server_call_finish(s->call, code, message != NULL ? message : why,
                            NULL);
  free(message);
  stream_unref(s);
  return NULL;
}

/* Callbacks of streaming calls (loop thread). */

static void stream_on_message(sluice_server_call *call,
                              const ProtobufCMessage *msg, void *user_data) {
  (void)call;
  stream_state *s = user_data;
  job *j = job_from((const Grpc__Testing__StreamingOutputCallRequest *)msg);
  if (j == NULL) {
    /* Out of memory: a job that just ends the call, if that works. */
    j = calloc(1, sizeof *j);
    if (j == NULL)
      return;
    j->code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
  }
  stream_push(s, j);
}

static void stream_on_half_close(sluice_server_call *call, void *user_data) {
  (void)call;
  stream_state *s = user_data;
  pthread_mutex_lock(&s->mu);
  s->half_closed = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void stream_on_send_ready(sluice_server_call *call, void *user_data) {
  (void)call;
  stream_state *s = user_data;
  pthread_mutex_lock(&s->mu);
  s->ready_gen++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void stream_on_done(sluice_server_call *call, int cancelled,
                           void *user_data) {
  (void)call;
  (void)cancelled;
  stream_state *s = user_data;
  pthread_mutex_lock(&s->mu);
  s->cancelled = 1; /* the stream is over either way: stop the worker */
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  stream_unref(s);
}

/* Registers the callbacks and starts the worker. On failure the call is
 * finished and s freed. */
static void stream_begin(stream_state *s, int with_messages) {
  sluice_server_call *call = s->call;
  const sluice_server_call_handlers h = {
      .on_message = with_messages ? stream_on_message : NULL,
      .on_half_close = with_messages ? stream_on_half_close : NULL,
      .on_send_ready = stream_on_send_ready,
      .on_done = stream_on_done};
  if (sluice_server_call_set_handlers(call, &h, s) != 0) {
    stream_free(s); /* on_done will not fire: no handlers */
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL,
                              "cannot set the call's handlers", NULL);
    return;
  }
  pthread_attr_t attr;
  pthread_t tid;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&tid, &attr, stream_worker, s);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "cannot start a thread for the call", NULL);
    stream_unref(s); /* the worker's; on_done drops the other */
  }
}

static void
streaming_output_call(sluice_server_call *call,
                      const Grpc__Testing__StreamingOutputCallRequest *req,
                      void *user_data) {
  (void)user_data;
  echo_metadata(call);
  stream_state *s = stream_new(call, 0);
  job *j = s != NULL ? job_from(req) : NULL;
  if (j == NULL) {
    if (s != NULL)
      stream_free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  stream_push(s, j);
  s->half_closed = 1; /* the single request is the whole stream */
  stream_begin(s, 0);
}

static void duplex_call(sluice_server_call *call, int hold) {
  echo_metadata(call);
  stream_state *s = stream_new(call, hold);
  if (s == NULL) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  stream_begin(s, 1);
}

static void full_duplex_call(sluice_server_call *call, void *user_data) {
  (void)user_data;
  duplex_call(call, 0);
}

static void half_duplex_call(sluice_server_call *call, void *user_data) {
  (void)user_data;
  duplex_call(call, 1);
}

/* Stops every worker (their calls end) and waits, bounded, until every
 * stream state is freed. Called after sluice_server_shutdown, when on_done
 * has fired for every call. */
static void stop_streams(void) {
  pthread_mutex_lock(&live_mu);
  for (stream_state *s = live; s != NULL; s = s->next) {
    pthread_mutex_lock(&s->mu);
    s->cancelled = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  struct timespec until = deadline_in_us(STOP_WAIT_MS * 1000ull);
  int rc = 0;
  while (n_live > 0 && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&live_cv, &live_mu, &until);
  if (n_live > 0)
    fprintf(stderr,
            "interop_server: %u streaming call(s) still held %d ms after "
            "shutdown (on_done missing?)\n",
            n_live, STOP_WAIT_MS);
  pthread_mutex_unlock(&live_mu);
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --port N [--host H] [--threads T]\n"
          "          [--use_tls --tls_cert FILE --tls_key FILE\n"
          "           [--tls_client_ca FILE [--require_client_cert]]]\n"
          "  --port N              port to listen on (default %d; 0 picks a "
          "free one)\n"
          "  --host H              address to listen on (default "
          "127.0.0.1)\n"
          "  --threads T           server loop threads (default: one per "
          "core)\n"
          "  --no-health           do not serve grpc.health.v1.Health (on by "
          "default)\n"
          "  --no-reflection       do not serve server reflection (on by "
          "default)\n"
          "  --use_tls[=B]         accept TLS only (B: true or false)\n"
          "  --tls_cert FILE       the server's certificate chain (PEM)\n"
          "  --tls_key FILE        its private key (PEM)\n"
          "  --tls_client_ca FILE  ask clients for a certificate from these "
          "CAs\n"
          "  --require_client_cert[=B]\n"
          "                        refuse clients without one (needs "
          "--tls_client_ca)\n"
          "%s"
          "Flags also take the --flag=value form.\n",
          prog, DEFAULT_PORT, sluice_example_conn_flags_usage);
}

/* "true"/"1"/"yes" -> 1, "false"/"0"/"no" -> 0, anything else -> -1. */
static int parse_bool(const char *v) {
  if (v == NULL)
    return -1;
  if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
    return 1;
  if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
    return 0;
  return -1;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *host = "127.0.0.1";
  const char *tls_cert = NULL, *tls_key = NULL, *tls_client_ca = NULL;
  unsigned long port = DEFAULT_PORT, threads = 0;
  int use_tls = 0, require_client_cert = 0, health = 1, reflection = 1;
  sluice_example_conn_flags conn_flags;
  sluice_example_conn_flags_init(&conn_flags);

  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    /* --flag value or --flag=value */
    char flag[64];
    const char *val = NULL;
    const char *eq = strchr(arg, '=');
    if (eq != NULL && (size_t)(eq - arg) < sizeof flag) {
      memcpy(flag, arg, (size_t)(eq - arg));
      flag[eq - arg] = '\0';
      val = eq + 1;
    } else {
      snprintf(flag, sizeof flag, "%s", arg);
    }
    if (strcmp(flag, "--no-health") == 0) {
      health = 0;
      continue;
    }
    if (strcmp(flag, "--no-reflection") == 0) {
      reflection = 0;
      continue;
    }
    /* Booleans: --flag alone is true; --flag=B, or --flag B when the next
     * argument is true or false. */
    if (strcmp(flag, "--use_tls") == 0 ||
        strcmp(flag, "--require_client_cert") == 0) {
      int b = 1;
      if (val != NULL)
        b = parse_bool(val);
      else if (i + 1 < argc && parse_bool(argv[i + 1]) >= 0)
        b = parse_bool(argv[++i]);
      if (b < 0) {
        fprintf(stderr, "%s: %s wants true or false\n", prog, flag);
        usage(stderr, prog);
        return 2;
      }
      if (strcmp(flag, "--use_tls") == 0)
        use_tls = b;
      else
        require_client_cert = b;
      continue;
    }
    if (val == NULL)
      val = i + 1 < argc ? argv[++i] : NULL;
    int bad = 0;
    if (sluice_example_conn_flag(flag, val, &conn_flags, &bad)) {
      /* parsed */
    } else if (strcmp(flag, "--port") == 0) {
      bad = sluice_example_parse_ulong(val, 65535, &port);
    } else if (strcmp(flag, "--threads") == 0) {
      bad = sluice_example_parse_ulong(val, 1024, &threads);
    } else if (strcmp(flag, "--host") == 0) {
      bad = val == NULL || *val == '\0';
      if (!bad)
        host = val;
    } else if (strcmp(flag, "--tls_cert") == 0) {
      bad = val == NULL || *val == '\0';
      tls_cert = val;
    } else if (strcmp(flag, "--tls_key") == 0) {
      bad = val == NULL || *val == '\0';
      tls_key = val;
    } else if (strcmp(flag, "--tls_client_ca") == 0) {
      bad = val == NULL || *val == '\0';
      tls_client_ca = val;
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, arg);
      usage(stderr, prog);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "%s: %s needs a valid value\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
  }
  const char *conflict = NULL;
  if (use_tls && (tls_cert == NULL || tls_key == NULL))
    conflict = "--use_tls needs --tls_cert and --tls_key";
  else if (!use_tls && (tls_cert != NULL || tls_key != NULL ||
                        tls_client_ca != NULL || require_client_cert))
    conflict = "--tls_cert, --tls_key, --tls_client_ca and "
               "--require_client_cert need --use_tls";
  else if (require_client_cert && tls_client_ca == NULL)
    conflict = "--require_client_cert needs --tls_client_ca";
  if (conflict != NULL) {
    fprintf(stderr, "%s: %s\n", prog, conflict);
    usage(stderr, prog);
    return 2;
  }

  /* Before any thread exists (see serve.h). */
  sigset_t stop_signals;
  sluice_example_block_signals(&stop_signals);
  cond_init_monotonic(&live_cv);

  char address[300];
  if (sluice_example_address(address, sizeof address, host, port, prog) != 0)
    return 2;

  int exit_code = 1, rc;
  sluice_server_opts *opts = NULL;
  sluice_server *srv = NULL;
  const Grpc__Testing__TestService_SluiceHandlers handlers = {
      .empty_call = empty_call,
      .unary_call = unary_call,
      .cacheable_unary_call = unary_call,
      .streaming_output_call = streaming_output_call,
      .streaming_input_call = streaming_input_call,
      .full_duplex_call = full_duplex_call,
      .half_duplex_call = half_duplex_call,
      /* unimplemented_call: none, the dispatch answers UNIMPLEMENTED */
  };

  if ((rc = sluice_server_opts_new(&opts)) != 0 ||
      (rc = sluice_server_opts_set_threads(opts, (unsigned)threads)) != 0 ||
      (rc = sluice_server_opts_set_health(opts, health)) != 0 ||
      (rc = sluice_server_opts_set_reflection(opts, reflection)) != 0) {
    fprintf(stderr, "%s: cannot create the server: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  if (sluice_example_apply_conn_flags(opts, &conn_flags, prog) != 0) {
    exit_code = 2;
    goto out;
  }
  if (use_tls &&
      sluice_example_server_tls(opts, tls_cert, tls_key, tls_client_ca,
                                require_client_cert, prog) != 0) {
    exit_code = 2; /* bad arguments */
    goto out;
  }
  if ((rc = sluice_server_new(&srv, opts)) != 0) {
    fprintf(stderr, "%s: cannot create the server: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  if ((rc = grpc__testing__test_service__sluice_register(srv, &handlers,
                                                         NULL)) != 0) {
    fprintf(stderr, "%s: cannot register TestService: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  exit_code = sluice_example_serve(srv, address, &stop_signals,
                                   SHUTDOWN_GRACE_MS, prog);

out:
  stop_streams();
  sluice_server_del(srv);
  sluice_server_opts_del(opts);
  pthread_cond_destroy(&live_cv);
  return exit_code;
}
