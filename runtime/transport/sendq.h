/* The send queue of one call: serialized messages waiting for HTTP/2.
 *
 * Producers (sluice_call_send, sluice_server_call_send) run on any thread;
 * the loop thread drains the queue from the stream's nghttp2 data provider.
 * A mutex guards it. The queue is bounded: a push that finds `bound` bytes
 * already queued is refused (SLUICE_ERR_FULL) and the producer is told when
 * it may push again (the drain reports "ready" once below half the bound),
 * so a stalled peer holds at most bound + one message here; everything else
 * waits in the producer.
 */
#ifndef SLUICE_TRANSPORT_SENDQ_H
#define SLUICE_TRANSPORT_SENDQ_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct sluice__sendbuf {
  struct sluice__sendbuf *next;
  uint8_t *data; /* [5-byte prefix | message], malloc'd, owned */
  size_t len, sent;
  uint64_t lent; /* lend epoch in which a piece of data was last lent
                    (transport/lend.h), 0 never */
} sluice__sendbuf;

typedef struct sluice__sendq {
  uv_mutex_t mu;
  sluice__sendbuf *head, *tail;
  sluice__sendbuf *sent_head, *sent_tail; /* retained after sending */
  int retain;          /* keep sent buffers so that the call can be replayed */
  size_t retain_limit; /* stop retaining past this many bytes; 0: none */
  int retain_dropped;  /* retention stopped at the limit: no replay */
  size_t queued;       /* bytes not yet handed to HTTP/2 */
  size_t n_sent_bytes; /* handed to HTTP/2 since the last rewind */
  size_t bound;
  uint64_t n_pushed;
  int closed;     /* no more pushes (half-close, finish or failure) */
  int want_ready; /* a push was refused: report readiness */
  int deferred;   /* the data provider said DEFERRED: resume it */
  /* The first message's node lives here: a unary call allocates none. */
  sluice__sendbuf first;
  int first_used;
} sluice__sendq;

/* bound 0 means unbounded (a unary call's single message). Returns 0 or
 * SLUICE_ERR_SYSTEM. */
int sluice__sendq_init(sluice__sendq *q, size_t bound);
/* Keeps sent buffers (a call with a single request message that may be
 * retried transparently). Set before the first push. */
static inline void sluice__sendq_retain(sluice__sendq *q) { q->retain = 1; }

/* Retains sent buffers up to limit bytes pushed in all (0: no limit);
 * a push past the limit stops retention for good, frees what was kept and
 * sets retain_dropped (a call that can no longer be replayed commits). Set
 * before the first push. */
static inline void sluice__sendq_retain_upto(sluice__sendq *q, size_t limit) {
  q->retain = 1;
  q->retain_limit = limit;
}

/* Non-zero once retention stopped at its limit (thread-safe). */
int sluice__sendq_retain_dropped(sluice__sendq *q);

/* Fills dst (initialised, empty) with copies of every message src holds,
 * sent and retained or still queued, and closes dst if src is closed:
 * another stream's own copy of the request (a hedged attempt). Returns 0,
 * SLUICE_ERR_NOMEM or SLUICE_ERR_STATE (src dropped sent bytes; dst then
 * holds what was copied: destroy it). */
int sluice__sendq_copy(sluice__sendq *dst, sluice__sendq *src);

/* Puts every retained sent buffer back in front, unsent: the call is
 * replayed on another stream. Returns 0, or -1 when nothing can be replayed
 * because bytes were sent without being retained. */
int sluice__sendq_rewind(sluice__sendq *q);

/* The queue's mutex, lent to its owner for short critical sections of its
 * own that call nothing of the queue while they hold it (a server call's
 * metadata lists): one mutex per call rather than two. */
static inline uv_mutex_t *sluice__sendq_mutex(sluice__sendq *q) {
  return &q->mu;
}

/* Frees queued buffers and the mutex. */
void sluice__sendq_destroy(sluice__sendq *q);

/* Appends data (len bytes, malloc'd; ownership passes to the queue on 0).
 * force skips the bound (a server's last message, handed to finish, must
 * not be refused). Returns 0, SLUICE_ERR_FULL (queue at bound; want_ready
 * set), SLUICE_ERR_STATE (closed) or SLUICE_ERR_NOMEM. *was_deferred tells
 * whether the data provider must be resumed. The common case (the first
 * message) takes the lock once and allocates nothing. */
int sluice__sendq_push(sluice__sendq *q, uint8_t *data, size_t len, int force,
                       int *was_deferred);

/* Marks the end of the messages. Returns 0 or SLUICE_ERR_STATE if already
 * closed. *was_deferred as for push. */
int sluice__sendq_close(sluice__sendq *q, int *was_deferred);

/* Closes and drops everything queued (a failed or cancelled call). */
void sluice__sendq_abort(sluice__sendq *q);

/* Outcome of one drain. */
typedef enum {
  SLUICE__SENDQ_DATA,    /* bytes were copied; more may follow */
  SLUICE__SENDQ_EOF,     /* bytes (maybe 0) copied and the queue is done */
  SLUICE__SENDQ_DEFERRED /* empty but open: resume when pushed */
} sluice__sendq_state;

/* Loop thread, data provider: copies up to cap bytes into dst and stores
 * the count in *n. *ready is set when a refused producer may push again. */
sluice__sendq_state sluice__sendq_read(sluice__sendq *q, uint8_t *dst,
                                       size_t cap, size_t *n, int *ready);

/* Takes one piece of the queue: p, n bytes inside the queued buffer. With
 * may_lend set it may keep referring to p instead of copying it (returns
 * 1) until the calling thread's lend scope closes; otherwise it copies the
 * bytes and returns 0. -1: it could take them neither way (no memory). */
typedef int (*sluice__sendq_piece_fn)(void *ud, const uint8_t *p, size_t n,
                                      int may_lend);

/* Loop thread, data provider: as sluice__sendq_read, handing up to cap
 * bytes to fn piece by piece (one per queued buffer touched) under the
 * queue's lock. Pieces may be lent only inside a lend scope and never from
 * a queue with a retain limit (its buffers may be freed by a producer's
 * thread, which no scope of the loop thread covers). *n counts the bytes
 * taken, up to the piece fn failed on. */
sluice__sendq_state sluice__sendq_lend(sluice__sendq *q, size_t cap,
                                       sluice__sendq_piece_fn fn, void *ud,
                                       size_t *n, int *ready);

/* Loop thread, data provider of a DATA frame sent without a copy into
 * nghttp2 (NGHTTP2_DATA_FLAG_NO_COPY): how many of the next cap bytes the
 * frame can carry now (*n) and whether they end the queue; takes nothing
 * (sluice__sendq_read copies them when the frame goes out). DEFERRED as for
 * read: empty but open, resume when pushed. */
sluice__sendq_state sluice__sendq_peek(sluice__sendq *q, size_t cap, size_t *n);

/* Bytes queued now (thread-safe). */
size_t sluice__sendq_queued(sluice__sendq *q);

/* Messages pushed so far (thread-safe). */
uint64_t sluice__sendq_pushed(sluice__sendq *q);

/* Non-zero once closed (thread-safe). */
int sluice__sendq_is_closed(sluice__sendq *q);

#endif
