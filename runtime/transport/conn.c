/* Socket I/O without SIGPIPE. A write to a socket whose peer has gone
 * raises SIGPIPE, and its default action kills the process: a server or
 * client written from the README (which leaves signals alone) died the
 * first time a peer vanished mid-call. gRPC does not ask its users to
 * ignore SIGPIPE, nor does sluice. libuv's uv_write/uv_try_write write
 * with write/writev on Linux, which raise it, so libuv only tells us when
 * the socket is ready (uv_poll) and the reads and writes are ours: send()
 * with MSG_NOSIGNAL (SO_NOSIGPIPE on systems that lack it) reports EPIPE
 * for that one write and touches nothing else. Blocking SIGPIPE in the
 * loop thread instead is not enough: uv_write finishes a backed-up write
 * later from inside uv_run, on whatever thread runs the loop (the user's,
 * for a channel on the user's loop), and a mask kept for a loop thread's
 * whole life would also hold for the handlers it runs and the processes
 * they start. The process's signal dispositions are never changed. */
#include "transport/conn.h"

#include "core/list.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/bigbuf.h"
#include "sluice/status.h"
#include "transport/addr.h"
#include "transport/lend.h"
#include "transport/scratch.h"
#include "transport/tls.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SO_NOSIGPIPE is set on the socket instead */
#endif

static void do_flush(sluice__task *t) {
  sluice__conn_flush(SLUICE__CONTAINER_OF(t, sluice__conn, flush_task));
}

static void on_poll(uv_poll_t *p, int status, int events);
static void finish_close(sluice__conn *c);

static void do_closed(sluice__task *t) {
  finish_close(SLUICE__CONTAINER_OF(t, sluice__conn, closed_task));
}

int sluice__conn_init(sluice__conn *c, sluice__loop *loop, int is_pipe,
                      const sluice__conn_hooks *hooks) {
  memset(c, 0, sizeof *c);
  c->loop = loop;
  c->hooks = hooks;
  c->is_pipe = is_pipe;
  c->fd = -1;
  c->flush_task.fn = do_flush;
  c->closed_task.fn = do_closed;
  return 0;
}

/* Polls for what the connection waits for: input once started, the socket
 * becoming writable while connecting or while a write is pending. Returns
 * 0, or -1 once closing. */
static int update_poll(sluice__conn *c) {
  if (c->closing || !c->poll_open)
    return c->closing ? -1 : 0;
  int ev = (c->started ? UV_READABLE : 0) |
           (c->connecting || c->writing ? UV_WRITABLE : 0);
  if (ev == c->poll_events)
    return 0;
  c->poll_events = ev;
  int rv = ev ? uv_poll_start(&c->poll, ev, on_poll) : uv_poll_stop(&c->poll);
  if (rv != 0) {
    sluice__conn_close(c, "cannot poll the socket");
    return -1;
  }
  return 0;
}

/* Takes fd (closed with the connection from now on, even on failure). */
static int adopt(sluice__conn *c, uv_os_sock_t fd) {
  int one = 1;
  c->fd = fd;
  if (!c->is_pipe)
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
  setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  if (uv_poll_init_socket(sluice__loop_uv(c->loop), &c->poll, fd) != 0)
    return SLUICE_ERR_SYSTEM;
  c->poll.data = c;
  c->poll_open = 1;
  return 0;
}

static void fill_peer(sluice__conn *c) {
  if (c->is_pipe) {
    snprintf(c->peer, sizeof c->peer, "unix:");
    return;
  }
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0) {
    snprintf(c->peer, sizeof c->peer, "unknown");
    return;
  }
  sluice__addr_print((const struct sockaddr *)&ss, SLUICE__ADDR_URI, c->peer,
                     sizeof c->peer);
}

/* The connect's outcome (status 0 or a uv error), reported once. */
static void connect_done(sluice__conn *c, int status) {
  if (!c->connecting)
    return;
  c->connecting = 0;
  if (c->connect_timer_open)
    uv_timer_stop(&c->connect_timer);
  if (status == 0)
    fill_peer(c);
  if (update_poll(c) != 0)
    return;
  if (c->hooks->on_connected)
    c->hooks->on_connected(c, status);
}

static void on_connect_timeout(uv_timer_t *t) {
  sluice__conn *c = t->data;
  connect_done(c, c->connect_status ? c->connect_status : UV_ETIMEDOUT);
}

int sluice__conn_connect(sluice__conn *c, const struct sockaddr *addr,
                         const char *path, uint64_t timeout_ms) {
  struct sockaddr_un un;
  socklen_t len;
  if (c->is_pipe) {
    size_t pl = strlen(path);
    if (pl >= sizeof un.sun_path)
      return SLUICE_ERR_SYSTEM;
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    memcpy(un.sun_path, path, pl + 1);
    addr = (const struct sockaddr *)&un;
    len = sizeof un;
  } else {
    len = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                      : sizeof(struct sockaddr_in);
  }
  int fd =
      socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || adopt(c, fd) != 0)
    return SLUICE_ERR_SYSTEM;
  uv_timer_init(sluice__loop_uv(c->loop), &c->connect_timer);
  c->connect_timer.data = c;
  c->connect_timer_open = 1;
  c->connecting = 1;
  if (connect(fd, addr, len) != 0 && errno != EINPROGRESS && errno != EINTR) {
    /* Failed at once (a Unix socket nobody listens on): reported from the
     * loop like every other outcome. */
    c->connect_status = -errno; /* uv's codes on Unix */
    uv_timer_start(&c->connect_timer, on_connect_timeout, 0, 0);
    return 0;
  }
  if (timeout_ms)
    uv_timer_start(&c->connect_timer, on_connect_timeout, timeout_ms, 0);
  return update_poll(c) == 0 ? 0 : SLUICE_ERR_SYSTEM;
}

int sluice__conn_open_fd(sluice__conn *c, uv_os_sock_t fd) {
  if (adopt(c, fd) != 0)
    return SLUICE_ERR_SYSTEM;
  fill_peer(c);
  return 0;
}

/* A clean end (everything flushed): over TLS a close_notify goes out first,
 * in one best-effort write (a few dozen bytes on an idle socket), so the
 * peer sees a proper end rather than a truncation. */
static void close_gracefully(sluice__conn *c, const char *reason) {
  if (c->tls && sluice__tls_established(c->tls)) {
    uint8_t alert[256]; /* a close_notify record is ~24-31 bytes */
    sluice__tls_close_notify(c->tls);
    size_t n = sluice__tls_take(c->tls, alert, sizeof alert);
    if (n)
      (void)send(c->fd, alert, n, MSG_NOSIGNAL | MSG_DONTWAIT);
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

/* nghttp2's NGHTTP2_ERR_TOO_MANY_CONTINUATIONS (the CVE-2024-28182 fix of
 * 1.61, which Debian backported to 1.52): a CONTINUATION flood. */
#define SLUICE__NGHTTP2_TOO_MANY_CONT (-905)

/* Plaintext HTTP/2 bytes to nghttp2. Returns 0, or -1 once closing. */
static int h2_input(sluice__conn *c, const uint8_t *data, size_t n) {
  ssize_t rv = nghttp2_session_mem_recv(c->session, data, n);
  if (c->closing)
    return -1;
  if (c->h2guard.failed) { /* no GOAWAY: the session is not to be used */
    sluice__conn_close(c, "out of memory (HTTP/2 session)");
    return -1;
  }
  if (rv < 0) {
    /* nghttp2 queues a GOAWAY for most protocol errors; a flood (too many
     * SETTINGS/PING ACKs or RST_STREAMs queued for an attacker that does
     * not read, or a CONTINUATION flood) gets ours, ENHANCE_YOUR_CALM, and
     * so does any other error nghttp2 queued none for. Either way the
     * GOAWAY is flushed and the close lingers (bounded), so that the peer
     * reads it instead of a TCP RST caused by its unread input. */
    int32_t last = nghttp2_session_get_last_proc_stream_id(c->session);
    if (rv == NGHTTP2_ERR_FLOODED || rv == SLUICE__NGHTTP2_TOO_MANY_CONT) {
      nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE, last,
                            NGHTTP2_ENHANCE_YOUR_CALM, (const uint8_t *)"flood",
                            5);
      if (c->hooks->on_calm)
        c->hooks->on_calm(c);
      sluice__conn_linger_close(c, "HTTP/2 flood from peer");
      return -1;
    }
    if (!nghttp2_session_want_write(c->session))
      nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE, last,
                            rv == NGHTTP2_ERR_CALLBACK_FAILURE
                                ? NGHTTP2_INTERNAL_ERROR
                                : NGHTTP2_PROTOCOL_ERROR,
                            NULL, 0);
    sluice__conn_linger_close(c, "HTTP/2 protocol error from peer");
    return -1;
  }
  sluice__conn_want_write(c);
  return 0;
}

/* Ciphertext in buf (n bytes of cap): drive the handshake, then decrypt
 * into buf (its bytes are in the engine by then) and pass the plaintext
 * on. */
static void tls_input(sluice__conn *c, uint8_t *buf, size_t cap, size_t n) {
  sluice__tls_state st = sluice__tls_feed(c->tls, buf, n);
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
    ssize_t got = sluice__tls_read(c->tls, buf, cap);
    if (got == 0)
      return;
    if (got < 0) {
      sluice__conn_flush(c);
      sluice__conn_close(c, sluice__tls_error(c->tls));
      return;
    }
    if (h2_input(c, buf, (size_t)got) != 0)
      return;
  }
}

/* Reads what the socket has, bounded per turn like libuv's reader (the
 * poll is level-triggered: the rest comes next turn), into the thread's
 * read scratch buffer (own memory if a callback of this read reads too). */
static void read_input(sluice__conn *c) {
  const size_t cap = SLUICE__SCRATCH_READ_SIZE;
  uint8_t *buf = sluice__scratch_take(SLUICE__SCRATCH_READ);
  int own = !buf;
  if (own && !(buf = sluice__malloc(cap))) {
    sluice__conn_close(c, "out of memory");
    return;
  }
  for (int i = 0; i < 32; i++) {
    ssize_t n = recv(c->fd, buf, cap, 0);
    if (n == 0) {
      sluice__conn_close(c, c->lingering ? c->linger_reason
                                         : "connection closed by peer");
      break;
    }
    if (n > 0 && c->lingering) { /* discarded, bounded */
      c->linger_read += (size_t)n;
      if (c->linger_read > SLUICE__CONN_LINGER_MAX) {
        sluice__conn_close(c, c->linger_reason);
        break;
      }
      continue;
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        sluice__conn_close(c, "connection read error");
      break;
    }
    if (c->tls)
      tls_input(c, buf, cap, (size_t)n);
    else
      h2_input(c, buf, (size_t)n);
    if (c->closing || (size_t)n < cap)
      break;
  }
  if (own)
    free(buf);
  else
    sluice__scratch_give(SLUICE__SCRATCH_READ);
}

/* Sends the n buffers of iov (consumed as they go out) as far as the
 * socket takes them now. Returns the count sent (less than all: the
 * socket is full), or -1 once closing. */
static ssize_t send_iov(sluice__conn *c, struct iovec *iov, int n) {
  size_t done = 0;
  while (n > 0) {
    if (!iov->iov_len) {
      iov++;
      n--;
      continue;
    }
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)n;
    ssize_t k = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    if (k > 0) {
      done += (size_t)k;
      for (size_t left = (size_t)k; left;) { /* drop what went */
        size_t t = left < iov->iov_len ? left : iov->iov_len;
        iov->iov_base = (uint8_t *)iov->iov_base + t;
        iov->iov_len -= t;
        left -= t;
        if (!iov->iov_len) {
          iov++;
          n--;
        }
      }
      continue;
    }
    if (k == 0)
      break; /* wait for the socket */
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      break;
    sluice__conn_close(c, "connection write error"); /* EPIPE: no signal */
    return -1;
  }
  return (ssize_t)done;
}

static ssize_t send_some(sluice__conn *c, const uint8_t *buf, size_t len) {
  struct iovec iov = {(void *)buf, len};
  return send_iov(c, &iov, 1);
}

/* Writes what an earlier batch left in pend. Returns 0 (all written, or
 * the rest waits: pend still set), or -1 once closing. */
static int write_pending(sluice__conn *c) {
  ssize_t n = send_some(c, c->pend + c->pend_sent, c->pend_len - c->pend_sent);
  if (n < 0)
    return -1;
  c->pend_sent += (size_t)n;
  if (c->pend_sent == c->pend_len) {
    sluice__bigbuf_put(c->pend);
    c->pend = NULL;
    c->pend_len = c->pend_sent = 0;
  }
  return 0;
}

static void on_writable(sluice__conn *c) {
  if (write_pending(c) != 0 || c->pend)
    return;
  c->writing = 0;
  if (update_poll(c) != 0)
    return;
  if (c->lingering) {
    shutdown(c->fd, SHUT_WR); /* the last frames are out */
    return;
  }
  sluice__conn_flush(c);
}

static void on_linger_timeout(uv_timer_t *t) {
  sluice__conn *c = t->data;
  sluice__conn_close(c, c->linger_reason);
}

void sluice__conn_linger_close(sluice__conn *c, const char *reason) {
  if (c->closing || c->lingering)
    return;
  if (!c->started || c->fd < 0 || c->connecting) {
    sluice__conn_close(c, reason);
    return;
  }
  sluice__conn_flush(c); /* what is queued, the GOAWAY last */
  /* A client closes at once: its calls learn of the end now, and a server
   * is no attacker to be kept reading our GOAWAY. */
  if (!c->closing && c->session &&
      !nghttp2_session_check_server_session(c->session)) {
    sluice__conn_close(c, reason);
    return;
  }
  if (c->closing)
    return;
  snprintf(c->linger_reason, sizeof c->linger_reason, "%s", reason);
  if (!c->connect_timer_open) {
    if (uv_timer_init(sluice__loop_uv(c->loop), &c->connect_timer) != 0) {
      sluice__conn_close(c, reason);
      return;
    }
    c->connect_timer.data = c;
    c->connect_timer_open = 1;
  }
  c->lingering = 1;
  uv_timer_start(&c->connect_timer, on_linger_timeout, SLUICE__CONN_LINGER_MS,
                 0);
  if (!c->writing)
    shutdown(c->fd, SHUT_WR);
}

static void on_poll(uv_poll_t *p, int status, int events) {
  sluice__conn *c = p->data;
  if (c->closing)
    return;
  if (c->connecting) {
    if (status < 0 || (events & UV_WRITABLE)) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
      if (!err && status < 0)
        err = ECONNREFUSED;
      connect_done(c, -err);
    }
    return;
  }
  /* An error (status < 0, and libuv stopped polling): read what came
   * before it, then the error itself. */
  if (status < 0 || (events & UV_READABLE)) {
    read_input(c);
    if (c->closing)
      return;
    if (status < 0) {
      sluice__conn_close(c, "connection error");
      return;
    }
  }
  if ((events & UV_WRITABLE) && c->writing)
    on_writable(c);
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
  if (update_poll(c) != 0)
    return SLUICE_ERR_SYSTEM;
  sluice__conn_want_write(c);
  return 0;
}

void sluice__conn_want_write(sluice__conn *c) {
  if (!c->closing)
    sluice__loop_defer(c->loop, &c->flush_task);
}

/* One write batch being built. Its bytes, in order, are segments: runs of
 * the batch's own buffer (nghttp2's frames, DATA frame headers, small
 * payloads: the thread's write scratch buffer, or heap memory when a
 * callback of this flush flushes too, or when a frame does not fit) and,
 * in plaintext, large DATA payloads lent where they lie in the calls' send
 * queues (transport/lend.h), which sendmsg writes without a copy. Over TLS
 * everything is copied: the engine encrypts one contiguous batch. */
#define BATCH_SEGS 64 /* segments per batch (an iovec each) */
#define LEND_MIN                                                               \
  2048 /* smaller pieces are copied: an iovec entry and the                    \
          bookkeeping cost more than the copy */

typedef struct {
  const uint8_t *p; /* lent bytes, or NULL: the next len of buf */
  size_t len;
} seg;

typedef struct sluice__conn_batch {
  uint8_t *buf;
  size_t ilen, cap; /* bytes in buf, its size */
  size_t len;       /* bytes in the batch: buf's and the lent ones */
  int heap;
  int lend; /* payloads may be lent (plaintext) */
  unsigned nsegs;
  seg segs[BATCH_SEGS];
} batch;

static int batch_open(batch *b, int lend) {
  b->ilen = b->len = 0;
  b->nsegs = 0;
  b->lend = lend;
  b->cap = SLUICE__SCRATCH_WRITE_SIZE;
  b->buf = sluice__scratch_take(SLUICE__SCRATCH_WRITE);
  b->heap = !b->buf;
  if (b->heap && !(b->buf = sluice__bigbuf_get(b->cap)))
    return -1;
  if (lend)
    sluice__lend_enter();
  return 0;
}

/* Gives b's own buffer back where it came from. */
static void batch_drop_buf(batch *b) {
  if (b->heap)
    sluice__bigbuf_put(b->buf);
  else
    sluice__scratch_give(SLUICE__SCRATCH_WRITE);
  b->buf = NULL;
}

/* After the batch was written or copied aside: the buffers its queues
 * freed meanwhile go now. */
static void batch_close(batch *b) {
  batch_drop_buf(b);
  if (b->lend)
    sluice__lend_leave();
}

/* Room for n more bytes at the end of b's buffer, or NULL when out of
 * memory. */
static uint8_t *batch_reserve(batch *b, size_t n) {
  if (b->ilen + n > b->cap) {
    size_t cap = b->ilen + n;
    uint8_t *nb = sluice__bigbuf_get(cap);
    if (!nb)
      return NULL;
    memcpy(nb, b->buf, b->ilen);
    batch_drop_buf(b);
    b->buf = nb;
    b->cap = cap;
    b->heap = 1;
  }
  return b->buf + b->ilen;
}

/* The n bytes written at batch_reserve are part of the batch. A lent
 * segment always leaves a place for the run after it (batch_piece). */
static void batch_commit(batch *b, size_t n) {
  if (!n)
    return;
  b->ilen += n;
  b->len += n;
  if (!b->lend)
    return;
  if (b->nsegs && !b->segs[b->nsegs - 1].p) {
    b->segs[b->nsegs - 1].len += n;
  } else {
    b->segs[b->nsegs].p = NULL;
    b->segs[b->nsegs++].len = n;
  }
}

/* Appends n bytes from p; 0 or -1 when out of memory. */
static int batch_copy(batch *b, const uint8_t *p, size_t n) {
  uint8_t *dst = batch_reserve(b, n);
  if (!dst)
    return -1;
  memcpy(dst, p, n);
  batch_commit(b, n);
  return 0;
}

/* A DATA payload piece from a send queue (sluice__sendq_piece_fn): lent
 * when large and the batch and the scope have room, copied otherwise. */
static int batch_piece(void *ud, const uint8_t *p, size_t n, int may_lend) {
  batch *b = ud;
  if (may_lend && b->lend && n >= LEND_MIN && b->nsegs + 2 <= BATCH_SEGS &&
      sluice__lend_reserve()) {
    b->segs[b->nsegs].p = p;
    b->segs[b->nsegs++].len = n;
    b->len += n;
    return 1;
  }
  return batch_copy(b, p, n);
}

/* The batch as an iovec (at most BATCH_SEGS entries). */
static int batch_iov(const batch *b, struct iovec *iov) {
  if (!b->lend) {
    iov[0].iov_base = b->buf;
    iov[0].iov_len = b->ilen;
    return 1;
  }
  size_t at = 0;
  for (unsigned i = 0; i < b->nsegs; i++) {
    const seg *s = &b->segs[i];
    iov[i].iov_base = (void *)(s->p ? s->p : b->buf + at);
    iov[i].iov_len = s->len;
    if (!s->p)
      at += s->len;
  }
  return (int)b->nsegs;
}

int sluice__conn_frame_data(sluice__conn *c, const uint8_t *hd, size_t pad,
                            sluice__sendq *q, size_t length, int *ready) {
  /* nghttp2 writes every DATA frame the windows allow inside one
   * mem_send call (it returns only for frames it serialised itself), so
   * the batch bound is enforced here: a full batch says WOULDBLOCK, the
   * frame stays nghttp2's next item and goes out in the next flush. */
  batch *b = c->batch;
  *ready = 0;
  if (!b || b->len >= SLUICE__CONN_WBUF_MAX)
    return NGHTTP2_ERR_WOULDBLOCK;
  /* Padding is never asked for; written as the callback's contract says
   * should a peer-independent default ever add it. */
  uint8_t head[10];
  memcpy(head, hd, 9);
  size_t hl = 9;
  if (pad > 0)
    head[hl++] = (uint8_t)(pad - 1);
  /* Where the frame starts, to take it back out. */
  size_t ilen = b->ilen, len = b->len;
  unsigned nsegs = b->nsegs;
  size_t last = nsegs ? b->segs[nsegs - 1].len : 0;
  if (batch_copy(b, head, hl) != 0)
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  size_t got = 0;
  sluice__sendq_lend(q, length, batch_piece, b, &got, ready);
  if (got != length) {
    /* Dropped since the frame was sized (an abort, which resets the
     * stream anyway), or no memory: nghttp2 resets the stream, nothing of
     * the frame may stay in the batch. */
    b->ilen = ilen;
    b->len = len;
    b->nsegs = nsegs;
    if (nsegs)
      b->segs[nsegs - 1].len = last;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (pad > 1) {
    uint8_t *z = batch_reserve(b, pad - 1);
    if (!z)
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    memset(z, 0, pad - 1);
    batch_commit(b, pad - 1);
  }
  return 0;
}

int sluice__conn_yield(sluice__conn *c, int32_t id) {
  if (c->n_yielded == c->cap_yielded) {
    /* A stream is listed at most once (deferred until resumed): bounded by
     * the connection's streams. */
    uint32_t cap = c->cap_yielded ? 2 * c->cap_yielded : 4;
    int32_t *ids = sluice__realloc(c->yielded, cap * sizeof *ids);
    if (!ids)
      return -1;
    c->yielded = ids;
    c->cap_yielded = cap;
  }
  c->yielded[c->n_yielded++] = id;
  return 0;
}

/* nghttp2 has nothing else to send: the streams that gave up their turn
 * go again, in the order they gave it up. Returns non-zero when any did. */
static int resume_yielded(sluice__conn *c) {
  int any = 0;
  uint32_t n = c->n_yielded;
  c->n_yielded = 0;
  for (uint32_t i = 0; i < n; i++)
    /* Fails only for a stream nghttp2 has closed meanwhile. */
    if (nghttp2_session_resume_data(c->session, c->yielded[i]) == 0)
      any = 1;
  return any;
}

/* Pulls up to a batch of nghttp2 output into b. Returns 0, or -1 once
 * closing. */
static int gather(sluice__conn *c, batch *b) {
  int rv = 0;
  c->batch = b; /* DATA frames are written here by the send_data callback */
  while (b->len < SLUICE__CONN_WBUF_MAX) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(c->session, &data);
    if (n < 0) {
      sluice__conn_close(c, "HTTP/2 session error");
      rv = -1;
      break;
    }
    if (n == 0) {
      if (resume_yielded(c))
        continue;
      break;
    }
    /* nghttp2 hands out one frame per call, valid until the next. */
    if (batch_copy(b, data, (size_t)n) != 0) {
      sluice__conn_close(c, "out of memory");
      rv = -1;
      break;
    }
    if (c->closing) {
      rv = -1;
      break;
    }
  }
  c->batch = NULL;
  return rv;
}

/* TLS: the next ciphertext into b. What the engine still holds goes first;
 * only when it holds none is a new plaintext batch gathered (in b),
 * encrypted, and b reused for its ciphertext, so at most one batch waits in
 * the engine. Returns 0, or -1 once closing. */
static int fill_tls(sluice__conn *c, batch *b) {
  if (!sluice__tls_pending(c->tls) && sluice__tls_established(c->tls) &&
      c->session) {
    if (gather(c, b) != 0)
      return -1;
    if (b->len && sluice__tls_write(c->tls, b->buf, b->len) != 0) {
      sluice__conn_close(c, sluice__tls_error(c->tls));
      return -1;
    }
  }
  b->ilen = b->len = sluice__tls_take(c->tls, b->buf, b->cap);
  return 0;
}

static int more_output(sluice__conn *c) {
  if (c->tls && sluice__tls_pending(c->tls))
    return 1;
  if (c->tls && !sluice__tls_established(c->tls))
    return 0;
  /* A yielded stream is deferred for nghttp2, which would not ask. */
  return c->session &&
         (nghttp2_session_want_write(c->session) || c->n_yielded > 0);
}

void sluice__conn_flush(sluice__conn *c) {
  if (c->closing || c->writing || !c->started || c->lingering)
    return;
  if (!c->tls && !c->session)
    return;
  batch b;
  if (batch_open(&b, !c->tls) != 0) {
    sluice__conn_close(c, "out of memory");
    return;
  }
  if ((c->tls ? fill_tls(c, &b) : gather(c, &b)) != 0) {
    batch_close(&b);
    return;
  }
  if (c->h2guard.failed) { /* nghttp2's state is not to be trusted */
    batch_close(&b);
    sluice__conn_close(c, "out of memory (HTTP/2 session)");
    return;
  }
  if (b.len == 0) {
    batch_close(&b);
    check_done(c);
    return;
  }
  /* Most writes complete at once; the rest is copied aside (the lent
   * buffers may go when the batch closes) and waits for the socket. */
  struct iovec iov[BATCH_SEGS];
  int niov = batch_iov(&b, iov);
  ssize_t n = send_iov(c, iov, niov);
  if (n >= 0 && (size_t)n < b.len) {
    size_t rest = b.len - (size_t)n;
    if (!(c->pend = sluice__bigbuf_get(rest))) {
      batch_close(&b);
      sluice__conn_close(c, "out of memory");
      return;
    }
    size_t at = 0;
    for (int i = 0; i < niov; i++) {
      memcpy(c->pend + at, iov[i].iov_base, iov[i].iov_len);
      at += iov[i].iov_len;
    }
    c->pend_len = rest;
    c->pend_sent = 0;
  }
  batch_close(&b);
  if (n < 0)
    return;
  if (c->pend) {
    c->writing = 1;
    update_poll(c);
    return;
  }
  if (more_output(c))
    sluice__conn_want_write(c);
  else
    check_done(c);
}

/* Every handle has closed (or none was open). */
static void finish_close(sluice__conn *c) {
  /* A flush deferred before the close would run on freed memory. */
  sluice__loop_cancel(c->loop, &c->flush_task);
  free(c->yielded);
  c->yielded = NULL;
  c->n_yielded = c->cap_yielded = 0;
  sluice__bigbuf_put(c->pend);
  c->pend = NULL;
  sluice__tls_del(c->tls);
  c->tls = NULL;
  c->hooks->on_closed(c, c->close_reason);
}

static void on_handle_closed(uv_handle_t *h) {
  sluice__conn *c = h->data;
  if (--c->open_handles == 0)
    finish_close(c);
}

void sluice__conn_close(sluice__conn *c, const char *reason) {
  if (c->closing)
    return;
  c->closing = 1;
  snprintf(c->close_msg, sizeof c->close_msg, "%s", reason ? reason : "closed");
  c->close_reason = c->close_msg;
  if (c->connect_timer_open) {
    c->connect_timer_open = 0;
    c->open_handles++;
    uv_close((uv_handle_t *)&c->connect_timer, on_handle_closed);
  }
  if (c->poll_open) {
    c->poll_open = 0;
    c->open_handles++;
    uv_close((uv_handle_t *)&c->poll, on_handle_closed);
  }
  /* uv_close has taken the descriptor out of the poll set: the peer sees
   * the close now, not a turn later. */
  if (c->fd >= 0) {
    close(c->fd);
    c->fd = -1;
  }
  if (!c->open_handles)
    sluice__loop_post(c->loop, &c->closed_task);
}
