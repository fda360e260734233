#include "transport/sendq.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/bigbuf.h"
#include "sluice/status.h"
#include "transport/lend.h"

int sluice__sendq_init(sluice__sendq *q, size_t bound) {
  q->head = q->tail = NULL;
  q->sent_head = q->sent_tail = NULL;
  q->retain = 0;
  q->retain_limit = 0;
  q->retain_dropped = 0;
  q->n_sent_bytes = 0;
  q->queued = 0;
  q->bound = bound;
  q->n_pushed = 0;
  q->closed = q->want_ready = q->deferred = 0;
  q->first_used = 0;
  return uv_mutex_init(&q->mu) == 0 ? 0 : SLUICE_ERR_SYSTEM;
}

static void free_list(sluice__sendq *q, sluice__sendbuf *b) {
  uint64_t epoch = sluice__lend_epoch();
  while (b) {
    sluice__sendbuf *next = b->next;
    if (epoch && b->lent == epoch)
      sluice__lend_keep(b->data); /* a batch still refers to it */
    else
      sluice__bigbuf_put(b->data);
    if (b != &q->first)
      free(b);
    b = next;
  }
}

void sluice__sendq_destroy(sluice__sendq *q) {
  free_list(q, q->head);
  free_list(q, q->sent_head);
  q->head = q->tail = q->sent_head = q->sent_tail = NULL;
  uv_mutex_destroy(&q->mu);
}

int sluice__sendq_push(sluice__sendq *q, uint8_t *data, size_t len, int force,
                       int *was_deferred) {
  *was_deferred = 0;
  sluice__sendbuf *spare = NULL; /* a node allocated outside the lock */
  uv_mutex_lock(&q->mu);
  for (;;) {
    if (q->closed) {
      uv_mutex_unlock(&q->mu);
      free(spare);
      return SLUICE_ERR_STATE;
    }
    if (!force && q->bound && q->queued >= q->bound) {
      q->want_ready = 1;
      uv_mutex_unlock(&q->mu);
      free(spare);
      return SLUICE_ERR_FULL;
    }
    if (!q->first_used || spare)
      break;
    /* Only the first message's node is embedded (a unary call takes the
     * lock once); later ones are allocated without holding it. */
    uv_mutex_unlock(&q->mu);
    if (!(spare = sluice__malloc(sizeof *spare)))
      return SLUICE_ERR_NOMEM;
    uv_mutex_lock(&q->mu);
  }
  sluice__sendbuf *b = spare;
  if (!q->first_used) {
    q->first_used = 1;
    b = &q->first;
  }
  b->next = NULL;
  b->data = data;
  b->len = len;
  b->sent = 0;
  b->lent = 0;
  if (q->tail)
    q->tail->next = b;
  else
    q->head = b;
  q->tail = b;
  q->queued += len;
  q->n_pushed++;
  *was_deferred = q->deferred;
  q->deferred = 0;
  sluice__sendbuf *drop = NULL;
  /* While retaining, queued + n_sent_bytes is everything kept. */
  if (q->retain && q->retain_limit &&
      q->queued + q->n_sent_bytes > q->retain_limit) {
    q->retain = 0;
    q->retain_dropped = 1;
    drop = q->sent_head; /* freed outside the lock */
    q->sent_head = q->sent_tail = NULL;
  }
  uv_mutex_unlock(&q->mu);
  free_list(q, drop);
  if (b != spare)
    free(spare); /* the first node came free while we allocated */
  return 0;
}

int sluice__sendq_close(sluice__sendq *q, int *was_deferred) {
  uv_mutex_lock(&q->mu);
  int rv = q->closed ? SLUICE_ERR_STATE : 0;
  q->closed = 1;
  *was_deferred = q->deferred;
  q->deferred = 0;
  uv_mutex_unlock(&q->mu);
  return rv;
}

void sluice__sendq_abort(sluice__sendq *q) {
  uv_mutex_lock(&q->mu);
  sluice__sendbuf *b = q->head, *s = q->sent_head;
  q->head = q->tail = q->sent_head = q->sent_tail = NULL;
  q->queued = 0;
  q->closed = 1;
  q->want_ready = 0;
  uv_mutex_unlock(&q->mu);
  free_list(q, b);
  free_list(q, s);
}

/* Non-zero when every byte handed to HTTP/2 since the last rewind is
 * still kept (retained whole, or the sent part of a queued buffer): the
 * request can be sent again from its start. Under q->mu. */
static int all_sent_kept(const sluice__sendq *q) {
  size_t kept = 0;
  for (const sluice__sendbuf *b = q->sent_head; b; b = b->next)
    kept += b->len;
  for (const sluice__sendbuf *b = q->head; b; b = b->next)
    kept += b->sent;
  return kept == q->n_sent_bytes;
}

int sluice__sendq_rewind(sluice__sendq *q) {
  uv_mutex_lock(&q->mu);
  int rv = 0;
  if (!all_sent_kept(q)) {
    rv = -1;
  } else if (q->sent_head) {
    q->sent_tail->next = q->head;
    if (!q->head)
      q->tail = q->sent_tail;
    q->head = q->sent_head;
    q->sent_head = q->sent_tail = NULL;
  }
  if (rv == 0) {
    q->queued = 0;
    for (sluice__sendbuf *b = q->head; b; b = b->next) {
      b->sent = 0;
      q->queued += b->len;
    }
    q->n_sent_bytes = 0;
    q->deferred = 0;
  }
  uv_mutex_unlock(&q->mu);
  return rv;
}

/* Under q->mu: what a drain of got bytes means for the data provider, when
 * it leaves the queue empty or not. */
static sluice__sendq_state state_after(sluice__sendq *q, int empty,
                                       size_t got) {
  if (!empty)
    return SLUICE__SENDQ_DATA;
  if (q->closed)
    return SLUICE__SENDQ_EOF;
  if (got == 0) {
    q->deferred = 1;
    return SLUICE__SENDQ_DEFERRED;
  }
  return SLUICE__SENDQ_DATA;
}

sluice__sendq_state sluice__sendq_lend(sluice__sendq *q, size_t cap,
                                       sluice__sendq_piece_fn fn, void *ud,
                                       size_t *n, int *ready) {
  size_t got = 0;
  sluice__sendbuf *done = NULL, **done_tail = &done;
  uv_mutex_lock(&q->mu);
  uint64_t epoch = q->retain_limit ? 0 : sluice__lend_epoch();
  while (q->head && got < cap) {
    sluice__sendbuf *b = q->head;
    size_t take = b->len - b->sent;
    if (take > cap - got)
      take = cap - got;
    int lent = fn(ud, b->data + b->sent, take, epoch != 0);
    if (lent < 0)
      break;
    if (lent)
      b->lent = epoch;
    b->sent += take;
    got += take;
    if (b->sent == b->len) {
      q->head = b->next;
      if (!q->head)
        q->tail = NULL;
      b->next = NULL;
      if (q->retain) {
        if (q->sent_tail)
          q->sent_tail->next = b;
        else
          q->sent_head = b;
        q->sent_tail = b;
      } else {
        *done_tail = b; /* freed (or kept, when lent) outside the lock */
        done_tail = &b->next;
      }
    }
  }
  q->queued -= got;
  q->n_sent_bytes += got;
  *ready = 0;
  if (q->want_ready && q->queued < q->bound / 2) {
    q->want_ready = 0;
    *ready = 1;
  }
  sluice__sendq_state st = state_after(q, q->head == NULL, got);
  uv_mutex_unlock(&q->mu);
  free_list(q, done);
  *n = got;
  return st;
}

typedef struct {
  uint8_t *dst;
  size_t at;
} copy_to;

static int copy_piece(void *ud, const uint8_t *p, size_t n, int may_lend) {
  (void)may_lend;
  copy_to *c = ud;
  memcpy(c->dst + c->at, p, n);
  c->at += n;
  return 0;
}

sluice__sendq_state sluice__sendq_read(sluice__sendq *q, uint8_t *dst,
                                       size_t cap, size_t *n, int *ready) {
  copy_to c = {dst, 0};
  return sluice__sendq_lend(q, cap, copy_piece, &c, n, ready);
}

sluice__sendq_state sluice__sendq_peek(sluice__sendq *q, size_t cap,
                                       size_t *n) {
  uv_mutex_lock(&q->mu);
  size_t got = q->queued < cap ? q->queued : cap;
  /* As read would say: the queue is empty after it when it takes all. */
  sluice__sendq_state st = state_after(q, got == q->queued, got);
  uv_mutex_unlock(&q->mu);
  *n = got;
  return st;
}

int sluice__sendq_retain_dropped(sluice__sendq *q) {
  uv_mutex_lock(&q->mu);
  int d = q->retain_dropped;
  uv_mutex_unlock(&q->mu);
  return d;
}

/* Appends a copy of b's whole message to dst. */
static int copy_buf(sluice__sendq *dst, const sluice__sendbuf *b) {
  uint8_t *data = sluice__bigbuf_get(b->len);
  if (!data)
    return SLUICE_ERR_NOMEM;
  memcpy(data, b->data, b->len);
  int deferred;
  int rv = sluice__sendq_push(dst, data, b->len, 1, &deferred);
  if (rv != 0)
    sluice__bigbuf_put(data);
  return rv;
}

int sluice__sendq_copy(sluice__sendq *dst, sluice__sendq *src) {
  uv_mutex_lock(&src->mu);
  int rv = all_sent_kept(src) ? 0 : SLUICE_ERR_STATE;
  for (sluice__sendbuf *b = src->sent_head; b && rv == 0; b = b->next)
    rv = copy_buf(dst, b);
  for (sluice__sendbuf *b = src->head; b && rv == 0; b = b->next)
    rv = copy_buf(dst, b);
  int closed = src->closed;
  uv_mutex_unlock(&src->mu);
  if (rv == 0 && closed) {
    int deferred;
    sluice__sendq_close(dst, &deferred);
  }
  return rv;
}

size_t sluice__sendq_queued(sluice__sendq *q) {
  uv_mutex_lock(&q->mu);
  size_t n = q->queued;
  uv_mutex_unlock(&q->mu);
  return n;
}

int sluice__sendq_is_closed(sluice__sendq *q) {
  uv_mutex_lock(&q->mu);
  int c = q->closed;
  uv_mutex_unlock(&q->mu);
  return c;
}

uint64_t sluice__sendq_pushed(sluice__sendq *q) {
  uv_mutex_lock(&q->mu);
  uint64_t n = q->n_pushed;
  uv_mutex_unlock(&q->mu);
  return n;
}
