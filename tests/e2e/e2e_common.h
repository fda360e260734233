/* Shared fixture of the end-to-end tests: an e2e.Echo server on loopback
 * whose handler obeys the request (see e2e.proto), a helper to wait for async
 * completions, and small clock/pattern helpers.
 *
 * Everything that waits is bounded in time; nothing asserts speed. */
#ifndef SLUICE_E2E_COMMON_H
#define SLUICE_E2E_COMMON_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>
#include <sluice/sluice.h>

#include "e2e.sluice.h"

/* Upper bound of any single wait in the tests: only there to catch hangs. */
#define E2E_HANG_MS 10000u

typedef struct e2e_pending e2e_pending;

typedef struct e2e_server {
  sluice_server *srv;
  int port;
  atomic_int calls; /* handler invocations, both methods */

  pthread_mutex_t mu;
  pthread_cond_t cv;    /* CLOCK_MONOTONIC */
  e2e_pending *pending; /* held (due 0) and delayed calls */
  int n_held;
  int stopping;
  pthread_t replier;

  /* Delayed or held calls finished after the fact (under mu). */
  int late_done;
  int late_cancelled; /* sluice_server_call_is_cancelled() was true */
  int late_bad_rc;    /* sluice_server_call_finish() returned non-zero */

  /* The last call seen by the handler (under mu). */
  char last_peer[128];
  uint64_t last_deadline;
  /* When log_md is set (under mu), every call's request metadata as the
   * handler sees it, appended: "key=value;" per entry (ASCII values), "|"
   * after each call. */
  int log_md;
  char md_log[2048];
} e2e_server;

/* Ignores SIGPIPE; call first in main(). The library never raises it
 * (test_sigpipe proves that with a program at SIG_DFL); the tests' own raw
 * sockets, which write to peers that vanish on purpose, would. */
void e2e_init(void);

uint64_t e2e_now_ms(void);

/* A blocking TCP socket connected to 127.0.0.1:port, with 5 s send and
 * receive timeouts (only to catch hangs), or -1 when the connect fails. */
int e2e_connect_loopback(int port);

/* A TCP socket bound to 127.0.0.1 on a free port, which goes to *port;
 * listening when backlog > 0. Asserts on failure. */
int e2e_bind_loopback(int *port, int backlog);
void e2e_sleep_ms(unsigned ms);

/* Fills / checks the payload pattern the handler uses. */
void e2e_fill(uint8_t *buf, size_t n);
int e2e_check(const uint8_t *buf, size_t n);

/* Starts a server on address (NULL: "127.0.0.1:0") with opts (may be NULL).
 * Fails the test on error. */
e2e_server *e2e_server_start(const char *address,
                             const sluice_server_opts *opts);
/* Finishes every held/delayed call, then shuts down (grace 0) and frees. */
void e2e_server_free(e2e_server *s);
/* Waits until n calls are held; returns 0 or -1 on timeout. */
int e2e_server_wait_held(e2e_server *s, int n, unsigned timeout_ms);
/* Waits until n held calls see sluice_server_call_is_cancelled() (the
 * library marks them on its loop, which may lag the event that caused it);
 * returns 0 or -1 on timeout. */
int e2e_server_wait_held_cancelled(e2e_server *s, int n, unsigned timeout_ms);
/* Waits until n late (held or delayed) calls have been finished. */
int e2e_server_wait_late(e2e_server *s, int n, unsigned timeout_ms);
/* Finishes every held call now with code (OK: an echo reply). Returns how
 * many were finished. */
int e2e_server_release(e2e_server *s, sluice_status_code code);

/* A middle tier's handler body: forwards req through down as a child call
 * of call (sluice_call_opts_set_parent: deadline and back-pressure) and
 * finishes call with the answer, or with the failure passed on. */
void e2e_forward(sluice_channel *down, sluice_server_call *call,
                 const E2e__EchoMsg *req);

/* A channel to "ipv4:127.0.0.1:<port>" (opts may be NULL). */
sluice_channel *e2e_channel_port(int port, const sluice_channel_opts *opts);
/* The same to s's port. */
sluice_channel *e2e_channel(const e2e_server *s,
                            const sluice_channel_opts *opts);

/* Async completions. */
typedef struct e2e_wait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fired;
  sluice_status_code code; /* of the last completion */
  char message[512];
  char text[256];
  size_t payload_len;
  int payload_ok;
  int resp_null;
} e2e_wait;

void e2e_wait_init(e2e_wait *w);
void e2e_wait_destroy(e2e_wait *w);
/* A callback of the generated E2e__Echo__*_Cb type; user_data = e2e_wait. */
void e2e_wait_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                 void *user_data);
/* Waits until n completions fired; returns fired. */
int e2e_wait_for(e2e_wait *w, int n, unsigned timeout_ms);

/* What a raw HTTP/2 client sends to start one gRPC call on a new
 * connection (made with nghttp2's client, for tests that must control the
 * bytes): the preface and SETTINGS (window: the stream window granted to
 * the server, and the connection window raised to it; 0 = HTTP/2's
 * default 64 KiB), then HEADERS for path with grpc-timeout when timeout
 * is not NULL ("200m"), and the message msg (len bytes, framed here) as
 * DATA, with END_STREAM when end_stream. Returns the size; free *out. */
size_t e2e_raw_call_bytes(const char *path, const char *timeout,
                          const uint8_t *msg, size_t len, int end_stream,
                          uint32_t window, uint8_t **out);

/* n unary calls of path (each one empty message) on a new connection, as
 * raw bytes like e2e_raw_call_bytes: calls[i] is call i's header pairs
 * after :method, :scheme and :path (name, value, ..., NULL), in order;
 * content-type and te follow. Returns the size; free *out. */
size_t e2e_raw_md_calls_bytes(const char *path, const char *const *const *calls,
                              size_t n, uint8_t **out);

/* An absolute CLOCK_MONOTONIC timespec ms from now. */
void e2e_abs_ms(struct timespec *ts, unsigned ms);
void e2e_cond_init(pthread_cond_t *cv);

#endif
