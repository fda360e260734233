/* The receiving side of one stream: reassembles gRPC messages from DATA
 * chunks and hands them to the owner, or holds them while the owner has
 * paused delivery (or has not started it yet).
 *
 * Bounded memory comes from HTTP/2 flow control: the sessions run without
 * automatic WINDOW_UPDATE, and the bytes of a chunk are returned to the
 * peer's window (nghttp2_session_consume) only once every message they
 * completed has been delivered. While paused, what is held is therefore at
 * most one stream window plus the partial message in the deframer.
 * Loop thread only.
 */
#ifndef SLUICE_TRANSPORT_RECV_H
#define SLUICE_TRANSPORT_RECV_H

#include <stddef.h>
#include <stdint.h>

#include "wire/framing.h"

typedef struct sluice__inmsg {
  struct sluice__inmsg *next;
  int compressed;
  size_t len;
  uint8_t data[];
} sluice__inmsg;

/* Delivers one message (borrowed bytes). Returns 0 to go on, non-zero when
 * the stream failed (the owner recorded why): receiving stops. */
typedef int (*sluice__deliver_fn)(void *owner, int compressed,
                                  const uint8_t *msg, size_t len);

typedef struct sluice__recv {
  sluice__deframer deframer;
  sluice__inmsg *head, *tail; /* held messages */
  size_t held;                /* bytes of held messages */
  size_t unconsumed;          /* received, not yet returned to the window */
  size_t buffered_max;        /* high-water mark of what was held */
  int paused;
  int failed;
  sluice__deliver_fn deliver;
  void *owner;
} sluice__recv;

void sluice__recv_init(sluice__recv *r, uint32_t max_size,
                       sluice__deliver_fn deliver, void *owner, int paused);
/* Frees held messages and the deframer buffer. */
void sluice__recv_reset(sluice__recv *r);

/* Feeds one DATA chunk. Returns OK, or the deframer's error with *reason
 * (RESOURCE_EXHAUSTED over max, INTERNAL bad flag), or CANCELLED when
 * deliver failed. *consume is set to the bytes that may be returned to the
 * peer now. */
sluice_status_code sluice__recv_feed(sluice__recv *r, const uint8_t *data,
                                     size_t len, size_t *consume,
                                     const char **reason);

/* Delivers held messages until paused or empty. Returns 0, or non-zero when
 * deliver failed. *consume as for feed. */
int sluice__recv_drain(sluice__recv *r, size_t *consume);

/* From inside deliver, with its msg: the block msg was reassembled in,
 * handed over (see sluice__deframer_take), or NULL (copy msg). */
static inline uint8_t *sluice__recv_take(sluice__recv *r, const uint8_t *msg) {
  return sluice__deframer_take(&r->deframer, msg);
}

/* Non-zero when messages are held. */
static inline int sluice__recv_holding(const sluice__recv *r) {
  return r->head != NULL;
}

/* Bytes not yet returned to the window (to give back to the connection
 * when the stream goes away). Resets the count. */
size_t sluice__recv_take_unconsumed(sluice__recv *r);

#endif
