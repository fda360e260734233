/* Shared fixture of the end-to-end tests; see e2e_common.h. */
#include "e2e_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct e2e_pending {
  sluice_server_call *call;
  uint64_t due_ms; /* 0: held until e2e_server_release() */
  char *text;
  uint32_t reply_size;
  e2e_pending *next;
};

void e2e_init(void) { signal(SIGPIPE, SIG_IGN); }

uint64_t e2e_now_ms(void) { return sluice_now_ns() / 1000000u; }

int e2e_connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct timeval tv = {5, 0}; /* only to catch hangs */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int e2e_bind_loopback(int *port, int backlog) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  if (backlog > 0)
    assert_int_equal(listen(fd, backlog), 0);
  socklen_t len = sizeof sa;
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  *port = ntohs(sa.sin_port);
  return fd;
}

void e2e_sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000,
                        .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

void e2e_fill(uint8_t *buf, size_t n) {
  for (size_t i = 0; i < n; i++)
    buf[i] = (uint8_t)(i * 31u + 7u + (i >> 13));
}

int e2e_check(const uint8_t *buf, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != (uint8_t)(i * 31u + 7u + (i >> 13)))
      return 0;
  return 1;
}

void e2e_abs_ms(struct timespec *ts, unsigned ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

typedef struct raw_bytes {
  uint8_t *p;
  size_t n, cap;
  const uint8_t *body; /* framed message */
  size_t body_len, body_sent;
  int end_stream;
} raw_bytes;

static ssize_t raw_collect(nghttp2_session *s, const uint8_t *data, size_t len,
                           int flags, void *ud) {
  (void)s;
  (void)flags;
  raw_bytes *b = ud;
  if (b->n + len > b->cap) {
    b->cap = (b->n + len) * 2;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
  memcpy(b->p + b->n, data, len);
  b->n += len;
  return (ssize_t)len;
}

static ssize_t raw_body(nghttp2_session *s, int32_t id, uint8_t *buf,
                        size_t len, uint32_t *flags, nghttp2_data_source *src,
                        void *ud) {
  (void)s;
  (void)id;
  (void)src;
  raw_bytes *b = ud;
  size_t n =
      b->body_len - b->body_sent < len ? b->body_len - b->body_sent : len;
  memcpy(buf, b->body + b->body_sent, n);
  b->body_sent += n;
  if (b->body_sent < b->body_len)
    return (ssize_t)n;
  if (b->end_stream)
    *flags |= NGHTTP2_DATA_FLAG_EOF;
  else if (n == 0)
    return NGHTTP2_ERR_DEFERRED; /* the stream stays open */
  return (ssize_t)n;
}

#define RAW_NV(n, v)                                                           \
  { (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }

size_t e2e_raw_call_bytes(const char *path, const char *timeout,
                          const uint8_t *msg, size_t len, int end_stream,
                          uint32_t window, uint8_t **out) {
  raw_bytes b;
  memset(&b, 0, sizeof b);
  uint8_t *framed = malloc(len + 5);
  assert_non_null(framed);
  framed[0] = 0;
  framed[1] = (uint8_t)(len >> 24);
  framed[2] = (uint8_t)(len >> 16);
  framed[3] = (uint8_t)(len >> 8);
  framed[4] = (uint8_t)len;
  if (len)
    memcpy(framed + 5, msg, len);
  b.body = framed;
  b.body_len = msg ? len + 5 : 0;
  b.end_stream = end_stream;

  nghttp2_session_callbacks *cbs;
  assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
  nghttp2_session_callbacks_set_send_callback(cbs, raw_collect);
  nghttp2_session *s;
  assert_int_equal(nghttp2_session_client_new(&s, cbs, &b), 0);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window};
  assert_int_equal(
      nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, &iv, window ? 1 : 0), 0);
  if (window)
    assert_int_equal(nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE,
                                                           0, (int32_t)window),
                     0);
  nghttp2_nv nv[7] = {RAW_NV(":method", "POST"),
                      RAW_NV(":scheme", "http"),
                      RAW_NV(":path", path),
                      RAW_NV(":authority", "localhost"),
                      RAW_NV("content-type", "application/grpc"),
                      RAW_NV("te", "trailers")};
  size_t n_nv = 6;
  if (timeout)
    nv[n_nv++] = (nghttp2_nv)RAW_NV("grpc-timeout", timeout);
  nghttp2_data_provider dp;
  dp.source.ptr = NULL;
  dp.read_callback = raw_body;
  assert_true(nghttp2_submit_request(s, NULL, nv, n_nv,
                                     msg || !end_stream ? &dp : NULL,
                                     NULL) > 0);
  assert_int_equal(nghttp2_session_send(s), 0);
  nghttp2_session_del(s);
  free(framed);
  *out = b.p;
  return b.n;
}

/* Each stream's body for e2e_raw_md_calls_bytes: one empty message. */
static ssize_t raw_empty_msg(nghttp2_session *s, int32_t id, uint8_t *buf,
                             size_t len, uint32_t *flags,
                             nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)id;
  (void)ud;
  int *sent = src->ptr;
  assert_true(len >= 5);
  memset(buf, 0, 5);
  *sent = 1;
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return 5;
}

size_t e2e_raw_md_calls_bytes(const char *path, const char *const *const *calls,
                              size_t n, uint8_t **out) {
  raw_bytes b;
  memset(&b, 0, sizeof b);
  nghttp2_session_callbacks *cbs;
  assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
  nghttp2_session_callbacks_set_send_callback(cbs, raw_collect);
  nghttp2_session *s;
  assert_int_equal(nghttp2_session_client_new(&s, cbs, &b), 0);
  nghttp2_session_callbacks_del(cbs);
  assert_int_equal(nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0), 0);
  int *sent = calloc(n ? n : 1, sizeof *sent);
  assert_non_null(sent);
  for (size_t c = 0; c < n; c++) {
    nghttp2_nv nv[24] = {RAW_NV(":method", "POST"), RAW_NV(":scheme", "http"),
                         RAW_NV(":path", path)};
    size_t n_nv = 3;
    for (const char *const *h = calls[c]; *h; h += 2) {
      assert_true(n_nv < 22);
      nv[n_nv++] = (nghttp2_nv)RAW_NV(h[0], h[1]);
    }
    nv[n_nv++] = (nghttp2_nv)RAW_NV("content-type", "application/grpc");
    nv[n_nv++] = (nghttp2_nv)RAW_NV("te", "trailers");
    nghttp2_data_provider dp;
    dp.source.ptr = &sent[c];
    dp.read_callback = raw_empty_msg;
    assert_true(nghttp2_submit_request(s, NULL, nv, n_nv, &dp, NULL) > 0);
  }
  assert_int_equal(nghttp2_session_send(s), 0);
  for (size_t c = 0; c < n; c++)
    assert_int_equal(sent[c], 1);
  free(sent);
  nghttp2_session_del(s);
  *out = b.p;
  return b.n;
}

void e2e_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}

/* ---- server side */

/* Echo reply: the request's text, and reply_size bytes of pattern (or the
 * request's payload back when reply_size is 0). */
static int reply_echo(sluice_server_call *call, const char *text,
                      const uint8_t *payload, size_t payload_len,
                      uint32_t reply_size) {
  E2e__EchoMsg out = E2E__ECHO_MSG__INIT;
  uint8_t *buf = NULL;
  out.text = (char *)(text != NULL ? text : "");
  if (reply_size > 0) {
    buf = malloc(reply_size);
    if (buf == NULL)
      return sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                                       "oom", NULL);
    e2e_fill(buf, reply_size);
    out.payload.data = buf;
    out.payload.len = reply_size;
  } else {
    out.payload.data = (uint8_t *)payload;
    out.payload.len = payload_len;
  }
  int rc = sluice_server_call_reply(call, &out.base);
  free(buf);
  return rc;
}

static void finish_late(e2e_server *s, e2e_pending *p,
                        sluice_status_code code) {
  int cancelled = sluice_server_call_is_cancelled(p->call) != 0;
  int rc;
  if (code == SLUICE_STATUS_OK)
    rc = reply_echo(p->call, p->text, NULL, 0, p->reply_size);
  else
    rc = sluice_server_call_finish(p->call, code, "released", NULL);
  free(p->text);
  free(p);
  pthread_mutex_lock(&s->mu);
  s->late_done++;
  s->late_cancelled += cancelled;
  s->late_bad_rc += rc != 0;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Finishes delayed calls when due (all of them at once when stopping). */
static void *replier_main(void *arg) {
  e2e_server *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    uint64_t now = e2e_now_ms(), next = 0;
    e2e_pending **pp = &s->pending, *due = NULL;
    for (; *pp != NULL; pp = &(*pp)->next) {
      e2e_pending *p = *pp;
      if (p->due_ms == 0)
        continue;
      if (p->due_ms <= now || s->stopping) {
        *pp = p->next;
        due = p;
        break;
      }
      if (next == 0 || p->due_ms < next)
        next = p->due_ms;
    }
    if (due != NULL) {
      pthread_mutex_unlock(&s->mu);
      finish_late(s, due, SLUICE_STATUS_OK);
      pthread_mutex_lock(&s->mu);
      continue;
    }
    if (s->stopping)
      break;
    struct timespec ts;
    unsigned wait = next == 0 ? 100u : (unsigned)(next - now);
    e2e_abs_ms(&ts, wait > 100u ? 100u : wait);
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void handle(sluice_server_call *call, const E2e__EchoMsg *req,
                   void *user_data) {
  e2e_server *s = user_data;
  atomic_fetch_add(&s->calls, 1);

  pthread_mutex_lock(&s->mu);
  snprintf(s->last_peer, sizeof s->last_peer, "%s",
           sluice_server_call_peer(call));
  s->last_deadline = sluice_server_call_deadline(call);
  if (s->log_md) {
    const sluice_metadata *md = sluice_server_call_metadata(call);
    size_t used = strlen(s->md_log);
    for (size_t i = 0; i < sluice_metadata_count(md); i++) {
      const char *key;
      const void *value;
      size_t len;
      assert_int_equal(sluice_metadata_get(md, i, &key, &value, &len), 0);
      used += (size_t)snprintf(s->md_log + used, sizeof s->md_log - used,
                               "%s=%.*s;", key, (int)len, (const char *)value);
      assert_true(used < sizeof s->md_log);
    }
    used += (size_t)snprintf(s->md_log + used, sizeof s->md_log - used, "|");
    assert_true(used < sizeof s->md_log);
  }
  pthread_mutex_unlock(&s->mu);

  if (req->echo_md) {
    const sluice_metadata *md = sluice_server_call_metadata(call);
    for (size_t i = 0; i < sluice_metadata_count(md); i++) {
      const char *key;
      const void *value;
      size_t len;
      if (sluice_metadata_get(md, i, &key, &value, &len) != 0)
        continue;
      sluice_server_call_add_initial_metadata(call, key, value, len);
      sluice_server_call_add_trailing_metadata(call, key, value, len);
    }
  }
  if (req->status_code != 0) {
    sluice_server_call_finish(call, (sluice_status_code)req->status_code,
                              req->status_message, NULL);
    return;
  }
  if (req->hold || req->delay_ms > 0) {
    e2e_pending *p = calloc(1, sizeof *p);
    char *text = strdup(req->text != NULL ? req->text : "");
    if (p == NULL || text == NULL) {
      free(p);
      free(text);
      sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED, "oom",
                                NULL);
      return;
    }
    p->call = call;
    p->text = text;
    p->reply_size = req->reply_size;
    p->due_ms = req->hold ? 0 : e2e_now_ms() + req->delay_ms;
    pthread_mutex_lock(&s->mu);
    p->next = s->pending;
    s->pending = p;
    if (req->hold)
      s->n_held++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return;
  }
  reply_echo(call, req->text, req->payload.data, req->payload.len,
             req->reply_size);
}

e2e_server *e2e_server_start(const char *address,
                             const sluice_server_opts *opts) {
  e2e_server *s = calloc(1, sizeof *s);
  assert_non_null(s);
  atomic_init(&s->calls, 0);
  pthread_mutex_init(&s->mu, NULL);
  e2e_cond_init(&s->cv);
  const E2e__Echo_SluiceHandlers handlers = {.echo = handle, .big = handle};
  assert_int_equal(sluice_server_new(&s->srv, opts), 0);
  assert_int_equal(e2e__echo__sluice_register(s->srv, &handlers, s), 0);
  assert_int_equal(
      sluice_server_listen(s->srv, address ? address : "127.0.0.1:0", &s->port),
      0);
  assert_int_equal(sluice_server_start(s->srv), 0);
  assert_int_equal(pthread_create(&s->replier, NULL, replier_main, s), 0);
  return s;
}

int e2e_server_wait_held_cancelled(e2e_server *s, int n, unsigned timeout_ms) {
  uint64_t end = e2e_now_ms() + timeout_ms;
  for (;;) {
    int c = 0;
    pthread_mutex_lock(&s->mu);
    for (e2e_pending *p = s->pending; p != NULL; p = p->next)
      if (p->due_ms == 0 && sluice_server_call_is_cancelled(p->call))
        c++;
    pthread_mutex_unlock(&s->mu);
    if (c >= n)
      return 0;
    if (e2e_now_ms() >= end)
      return -1;
    e2e_sleep_ms(10);
  }
}

int e2e_server_release(e2e_server *s, sluice_status_code code) {
  e2e_pending *held = NULL;
  pthread_mutex_lock(&s->mu);
  e2e_pending **pp = &s->pending;
  while (*pp != NULL) {
    e2e_pending *p = *pp;
    if (p->due_ms == 0) {
      *pp = p->next;
      p->next = held;
      held = p;
      s->n_held--;
    } else {
      pp = &p->next;
    }
  }
  pthread_mutex_unlock(&s->mu);
  int n = 0;
  while (held != NULL) {
    e2e_pending *next = held->next;
    finish_late(s, held, code);
    held = next;
    n++;
  }
  return n;
}

static int wait_until(e2e_server *s, const int *field, int n,
                      unsigned timeout_ms) {
  struct timespec ts;
  e2e_abs_ms(&ts, timeout_ms);
  int rc = 0;
  pthread_mutex_lock(&s->mu);
  while (*field < n && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  int ok = *field >= n;
  pthread_mutex_unlock(&s->mu);
  return ok ? 0 : -1;
}

int e2e_server_wait_held(e2e_server *s, int n, unsigned timeout_ms) {
  return wait_until(s, &s->n_held, n, timeout_ms);
}

int e2e_server_wait_late(e2e_server *s, int n, unsigned timeout_ms) {
  return wait_until(s, &s->late_done, n, timeout_ms);
}

void e2e_server_free(e2e_server *s) {
  if (s == NULL)
    return;
  e2e_server_release(s, SLUICE_STATUS_UNAVAILABLE);
  pthread_mutex_lock(&s->mu);
  s->stopping = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->replier, NULL);
  sluice_server_del(s->srv);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

sluice_channel *e2e_channel_port(int port, const sluice_channel_opts *opts) {
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", port);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, opts), 0);
  assert_non_null(ch);
  return ch;
}

sluice_channel *e2e_channel(const e2e_server *s,
                            const sluice_channel_opts *opts) {
  return e2e_channel_port(s->port, opts);
}

/* ---- client side */

void e2e_wait_init(e2e_wait *w) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  e2e_cond_init(&w->cv);
}

void e2e_wait_destroy(e2e_wait *w) {
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

void e2e_wait_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                 void *user_data) {
  e2e_wait *w = user_data;
  pthread_mutex_lock(&w->mu);
  w->fired++;
  w->code = st->code;
  snprintf(w->message, sizeof w->message, "%s",
           st->message != NULL ? st->message : "(null)");
  w->resp_null = resp == NULL;
  if (resp != NULL) {
    snprintf(w->text, sizeof w->text, "%s",
             resp->text != NULL ? resp->text : "");
    w->payload_len = resp->payload.len;
    w->payload_ok = e2e_check(resp->payload.data, resp->payload.len);
  }
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int e2e_wait_for(e2e_wait *w, int n, unsigned timeout_ms) {
  struct timespec ts;
  e2e_abs_ms(&ts, timeout_ms);
  int rc = 0;
  pthread_mutex_lock(&w->mu);
  while (w->fired < n && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
  int fired = w->fired;
  pthread_mutex_unlock(&w->mu);
  return fired;
}

typedef struct e2e_hop {
  sluice_server_call *call;
} e2e_hop;

static void forward_done(const sluice_status *st, const E2e__EchoMsg *resp,
                         void *ud) {
  e2e_hop *h = ud;
  if (st->code == SLUICE_STATUS_OK)
    sluice_server_call_reply(h->call, &resp->base);
  else
    sluice_server_call_finish(h->call, st->code, st->message, NULL);
  free(h);
}

void e2e_forward(sluice_channel *down, sluice_server_call *call,
                 const E2e__EchoMsg *req) {
  sluice_call_opts o;
  sluice_call_opts_init(&o);
  sluice_call_opts_set_parent(&o, call);
  e2e_hop *h = malloc(sizeof *h);
  if (!h) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  h->call = call;
  if (e2e__echo__echo__async(down, req, &o, forward_done, h) != 0) {
    free(h);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL,
                              "downstream call not started", NULL);
  }
}
