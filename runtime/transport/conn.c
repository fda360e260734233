#include "transport/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/status.h"
#include "transport/tls.h"

#define CONN_OF(field, ptr)                                                    \
  ((sluice__conn *)((char *)(ptr)-offsetof(sluice__conn, field)))

static void do_flush(sluice__task *t) {
  sluice__conn_flush(CONN_OF(flush_task, t));
}

int sluice__conn_init(sluice__conn *c, sluice__loop *loop, int is_pipe,
                      const sluice__conn_hooks *hooks) {
  memset(c, 0, sizeof *c);
  c->loop = loop;
  c->hooks = hooks;
  c->is_pipe = is_pipe;
  c->flush_task.fn = do_flush;
  c->wbuf = malloc(SLUICE__CONN_WBUF_MAX + 16384);
  c->rbuf = malloc(SLUICE__CONN_RBUF_SIZE);
  if (!c->wbuf || !c->rbuf) {
    free(c->wbuf);
    free(c->rbuf);
    return SLUICE_ERR_NOMEM;
  }
  int rv = is_pipe ? uv_pipe_init(sluice__loop_uv(loop), &c->io.pipe, 0)
                   : uv_tcp_init(sluice__loop_uv(loop), &c->io.tcp);
  if (rv != 0) {
    free(c->wbuf);
    free(c->rbuf);
    return SLUICE_ERR_SYSTEM;
  }
  c->io.handle.data = c;
  if (!is_pipe)
    uv_tcp_nodelay(&c->io.tcp, 1);
  return 0;
}

static void fill_peer(sluice__conn *c) {
  if (c->is_pipe) {
    snprintf(c->peer, sizeof c->peer, "unix:");
    return;
  }
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char ip[INET6_ADDRSTRLEN] = "?";
  if (uv_tcp_getpeername(&c->io.tcp, (struct sockaddr *)&ss, &len) != 0) {
    snprintf(c->peer, sizeof c->peer, "unknown");
    return;
  }
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    uv_ip6_name(a, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "ipv6:[%s]:%u", ip, ntohs(a->sin6_port));
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    uv_ip4_name(a, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "ipv4:%s:%u", ip, ntohs(a->sin_port));
  }
}

static void on_timer_closed(uv_handle_t *h);

static void on_connect_timeout(uv_timer_t *t) {
  sluice__conn *c = t->data;
  /* Closing the socket cancels the connect request: on_connect then sees
   * UV_ECANCELED; report the timeout instead. */
  if (!c->connect_req.data)
    return;
  c->connect_req.data = NULL; /* on_connected fires once */
  if (c->hooks->on_connected)
    c->hooks->on_connected(c, UV_ETIMEDOUT);
}

static void on_connect(uv_connect_t *req, int status) {
  sluice__conn *c = req->handle->data;
  if (c->connect_timer_open) {
    uv_timer_stop(&c->connect_timer);
  }
  if (!req->data) /* timed out, already reported */
    return;
  req->data = NULL;
  if (status == 0)
    fill_peer(c);
  if (c->hooks->on_connected)
    c->hooks->on_connected(c, status);
}

int sluice__conn_connect(sluice__conn *c, const struct sockaddr *addr,
                         const char *path, uint64_t timeout_ms) {
  c->connect_req.data = c;
  if (timeout_ms) {
    uv_timer_init(sluice__loop_uv(c->loop), &c->connect_timer);
    c->connect_timer.data = c;
    c->connect_timer_open = 1;
    uv_timer_start(&c->connect_timer, on_connect_timeout, timeout_ms, 0);
  }
  if (c->is_pipe) {
    uv_pipe_connect(&c->connect_req, &c->io.pipe, path, on_connect);
    return 0;
  }
  int rv = uv_tcp_connect(&c->connect_req, &c->io.tcp, addr, on_connect);
  return rv == 0 ? 0 : SLUICE_ERR_SYSTEM;
}

int sluice__conn_open_fd(sluice__conn *c, uv_os_sock_t fd) {
  int rv =
      c->is_pipe ? uv_pipe_open(&c->io.pipe, fd) : uv_tcp_open(&c->io.tcp, fd);
  if (rv != 0)
    return SLUICE_ERR_SYSTEM;
  if (!c->is_pipe)
    uv_tcp_nodelay(&c->io.tcp, 1);
  fill_peer(c);
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  sluice__conn *c = h->data;
  buf->base = (char *)c->rbuf;
  buf->len = SLUICE__CONN_RBUF_SIZE;
}

/* A clean end (everything flushed): over TLS a close_notify goes out first,
 * in one best-effort write (a few dozen bytes on an idle socket), so the
 * peer sees a proper end rather than a truncation. */
static void close_gracefully(sluice__conn *c, const char *reason) {
  if (c->tls && sluice__tls_established(c->tls)) {
    uint8_t alert[256]; /* a close_notify record is ~24-31 bytes */
    sluice__tls_close_notify(c->tls);
    size_t n = sluice__tls_take(c->tls, alert, sizeof alert);
    if (n) {
      uv_buf_t b = uv_buf_init((char *)alert, (unsigned)n);
      (void)uv_try_write(&c->io.stream, &b, 1);
    }
  }
  sluice__conn_close(c, reason);
}

/* A session that neither wants to read nor write is finished (GOAWAY sent
 * or received and every stream done, or a fatal error was queued). */
static void check_done(sluice__conn *c) {
  if (c->closing || c->writing || !c->session)
    return;
  if (c->close_when_flushed && !nghttp2_session_want_write(c->session)) {
    close_gracefully(c, "connection drained");
    return;
  }
  if (nghttp2_session_want_read(c->session) == 0 &&
      nghttp2_session_want_write(c->session) == 0)
    close_gracefully(c, "connection finished (GOAWAY)");
}

void sluice__conn_close_when_flushed(sluice__conn *c) {
  c->close_when_flushed = 1;
  sluice__conn_want_write(c);
}

/* Plaintext HTTP/2 bytes to nghttp2. Returns 0, or -1 once closing. */
static int h2_input(sluice__conn *c, const uint8_t *data, size_t n) {
  ssize_t rv = nghttp2_session_mem_recv(c->session, data, n);
  if (c->closing)
    return -1;
  if (rv < 0) {
    /* nghttp2 already queued a GOAWAY for protocol errors; try to send it. */
    sluice__conn_flush(c);
    sluice__conn_close(c, "HTTP/2 protocol error from peer");
    return -1;
  }
  sluice__conn_want_write(c);
  return 0;
}

/* Ciphertext in rbuf: drive the handshake, then decrypt into rbuf (its
 * bytes are in the engine by then) and pass the plaintext on. */
static void tls_input(sluice__conn *c, size_t n) {
  sluice__tls_state st = sluice__tls_feed(c->tls, c->rbuf, n);
  if (st == SLUICE__TLS_ERROR) {
    sluice__conn_flush(c); /* the alert, if any */
    sluice__conn_close(c, sluice__tls_error(c->tls));
    return;
  }
  if (st == SLUICE__TLS_ESTABLISHED && c->hooks->on_established) {
    c->hooks->on_established(c);
    if (c->closing)
      return;
  }
  sluice__conn_want_write(c); /* handshake messages, tickets, alerts */
  if (!sluice__tls_established(c->tls))
    return;
  for (;;) {
    ssize_t got = sluice__tls_read(c->tls, c->rbuf, SLUICE__CONN_RBUF_SIZE);
    if (got == 0)
      return;
    if (got < 0) {
      sluice__conn_flush(c);
      sluice__conn_close(c, sluice__tls_error(c->tls));
      return;
    }
    if (h2_input(c, c->rbuf, (size_t)got) != 0)
      return;
  }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  sluice__conn *c = s->data;
  (void)buf;
  if (c->closing)
    return;
  if (n < 0) {
    sluice__conn_close(c, n == UV_EOF ? "connection closed by peer"
                                      : "connection read error");
    return;
  }
  if (n == 0)
    return;
  if (c->tls) {
    tls_input(c, (size_t)n);
    return;
  }
  h2_input(c, c->rbuf, (size_t)n);
}

void sluice__conn_set_tls(sluice__conn *c, struct sluice__tls *t) {
  c->tls = t;
}

int sluice__conn_start(sluice__conn *c) {
  c->started = 1;
  if (c->tls && sluice__tls_start(c->tls) == SLUICE__TLS_ERROR) {
    sluice__conn_close(c, sluice__tls_error(c->tls));
    return SLUICE_ERR_SYSTEM;
  }
  if (uv_read_start(&c->io.stream, on_alloc, on_read) != 0) {
    sluice__conn_close(c, "cannot read from socket");
    return SLUICE_ERR_SYSTEM;
  }
  sluice__conn_want_write(c);
  return 0;
}

void sluice__conn_want_write(sluice__conn *c) {
  if (!c->closing)
    sluice__loop_defer(c->loop, &c->flush_task);
}

static void on_write(uv_write_t *req, int status) {
  sluice__conn *c = req->data;
  c->writing = 0;
  c->olen = 0;
  if (c->closing)
    return;
  if (status < 0) {
    sluice__conn_close(c, "connection write error");
    return;
  }
  sluice__conn_flush(c);
}

/* Pulls up to a batch of nghttp2 output into wbuf. Returns 0, or -1 once
 * closing. */
static int gather(sluice__conn *c) {
  while (c->wlen < SLUICE__CONN_WBUF_MAX) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(c->session, &data);
    if (n < 0) {
      sluice__conn_close(c, "HTTP/2 session error");
      return -1;
    }
    if (n == 0)
      break;
    /* nghttp2 hands out at most one frame (<= 16 KiB + header) per call. */
    if (c->wlen + (size_t)n > SLUICE__CONN_WBUF_MAX + 16384) {
      uint8_t *nb = realloc(c->wbuf, c->wlen + (size_t)n);
      if (!nb) {
        sluice__conn_close(c, "out of memory");
        return -1;
      }
      c->wbuf = nb;
    }
    memcpy(c->wbuf + c->wlen, data, (size_t)n);
    c->wlen += (size_t)n;
    if (c->closing)
      return -1;
  }
  return 0;
}

/* TLS: encrypts the plaintext batch (once established) and moves all
 * pending ciphertext into tbuf. Returns 0, or -1 once closing. */
static int encrypt_batch(sluice__conn *c) {
  if (sluice__tls_established(c->tls) && c->session) {
    if (gather(c) != 0)
      return -1;
    if (c->wlen && sluice__tls_write(c->tls, c->wbuf, c->wlen) != 0) {
      sluice__conn_close(c, sluice__tls_error(c->tls));
      return -1;
    }
    c->wlen = 0;
  }
  size_t p = sluice__tls_pending(c->tls);
  if (p > c->tcap) {
    uint8_t *nb = realloc(c->tbuf, p);
    if (!nb) {
      sluice__conn_close(c, "out of memory");
      return -1;
    }
    c->tbuf = nb;
    c->tcap = p;
  }
  c->obuf = c->tbuf;
  c->olen = p ? sluice__tls_take(c->tls, c->tbuf, p) : 0;
  return 0;
}

static int more_output(sluice__conn *c) {
  if (c->tls && sluice__tls_pending(c->tls))
    return 1;
  if (c->tls && !sluice__tls_established(c->tls))
    return 0;
  return c->session && nghttp2_session_want_write(c->session);
}

void sluice__conn_flush(sluice__conn *c) {
  if (c->closing || c->writing || !c->started)
    return;
  if (c->tls) {
    if (encrypt_batch(c) != 0)
      return;
  } else {
    if (!c->session || gather(c) != 0)
      return;
    c->obuf = c->wbuf;
    c->olen = c->wlen;
    c->wlen = 0;
  }
  if (c->olen == 0) {
    check_done(c);
    return;
  }
  uv_buf_t b = uv_buf_init((char *)c->obuf, (unsigned)c->olen);
  /* Most writes complete at once: skip the request round trip then. */
  int w = uv_try_write(&c->io.stream, &b, 1);
  if (w == (int)c->olen) {
    c->olen = 0;
    if (more_output(c))
      sluice__conn_want_write(c);
    else
      check_done(c);
    return;
  }
  if (w > 0) {
    memmove(c->obuf, c->obuf + w, c->olen - (size_t)w);
    c->olen -= (size_t)w;
    b = uv_buf_init((char *)c->obuf, (unsigned)c->olen);
  } else if (w != UV_EAGAIN && w != UV_ENOSYS) {
    sluice__conn_close(c, "connection write error");
    return;
  }
  c->write_req.data = c;
  c->writing = 1;
  if (uv_write(&c->write_req, &c->io.stream, &b, 1, on_write) != 0) {
    c->writing = 0;
    sluice__conn_close(c, "connection write error");
  }
}

static void on_handle_closed(uv_handle_t *h) {
  sluice__conn *c = h->data;
  if (c->connect_timer_open)
    return; /* wait for the timer too */
  /* A flush deferred before the close would run on freed memory. */
  sluice__loop_cancel(c->loop, &c->flush_task);
  free(c->wbuf);
  free(c->rbuf);
  free(c->tbuf);
  c->wbuf = c->rbuf = c->tbuf = NULL;
  sluice__tls_del(c->tls);
  c->tls = NULL;
  c->hooks->on_closed(c, c->close_reason);
}

static void on_timer_closed(uv_handle_t *h) {
  sluice__conn *c = h->data;
  c->connect_timer_open = 0;
  /* If the socket handle closed first, finish here. */
  if (c->closing == 2)
    on_handle_closed(&c->io.handle);
}

static void on_io_closed(uv_handle_t *h) {
  sluice__conn *c = h->data;
  c->closing = 2;
  on_handle_closed(h);
}

void sluice__conn_close(sluice__conn *c, const char *reason) {
  if (c->closing)
    return;
  c->closing = 1;
  snprintf(c->close_msg, sizeof c->close_msg, "%s", reason ? reason : "closed");
  c->close_reason = c->close_msg;
  if (c->connect_timer_open) {
    uv_timer_stop(&c->connect_timer);
    uv_close((uv_handle_t *)&c->connect_timer, on_timer_closed);
  }
  uv_close(&c->io.handle, on_io_closed);
}
