/* Length-prefixed message framing and reassembly. */
#include "wire/framing.h"

#include <stdlib.h>
#include <string.h>

#include "core/bigbuf.h"

void sluice__frame_header(uint8_t out[SLUICE__FRAME_HEADER_LEN], int compressed,
                          uint32_t len) {
  out[0] = compressed ? 1 : 0;
  out[1] = (uint8_t)(len >> 24);
  out[2] = (uint8_t)(len >> 16);
  out[3] = (uint8_t)(len >> 8);
  out[4] = (uint8_t)len;
}

void sluice__deframer_init(sluice__deframer *d, uint32_t max_size) {
  memset(d, 0, sizeof *d);
  d->max_size = max_size;
  d->err = SLUICE_STATUS_OK;
}

void sluice__deframer_reset(sluice__deframer *d) {
  sluice__bigbuf_put(d->buf);
  sluice__deframer_init(d, d->max_size);
}

static sluice_status_code fail(sluice__deframer *d, sluice_status_code code,
                               const char *why, const char **reason) {
  d->err = code;
  d->err_reason = why;
  if (reason != NULL)
    *reason = why;
  return code;
}

/* Decodes a complete prefix and checks its length against the limit. */
static sluice_status_code start_message(sluice__deframer *d,
                                        const char **reason) {
  d->compressed = d->hdr[0];
  d->len = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
           (uint32_t)d->hdr[3] << 8 | d->hdr[4];
  if (d->len > d->max_size) {
    d->last_len = d->len;
    return fail(d, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                "received message larger than max", reason);
  }
  d->filled = 0;
  return SLUICE_STATUS_OK;
}

/* The first block of a message that spans chunks holds at most this much;
 * it grows to the declared length once more arrives. */
#define FIRST_BLOCK ((size_t)64 * 1024)

/* Room for the first `need` bytes of the current message's body, keeping
 * what is filled. Only done when the message spans chunks, so
 * whole-in-one-chunk messages never allocate. A message over FIRST_BLOCK
 * gets a first block of FIRST_BLOCK and the whole declared length only
 * once bytes beyond it arrive: a peer that declares 4 MiB and sends a few
 * bytes (on each of many streams) makes us hold 64 KiB per stream, not
 * 4 MiB, for one extra copy of at most 64 KiB per large message. */
static int reserve(sluice__deframer *d, size_t need) {
  if (d->cap >= need) /* cap is 0 without a buffer (also once taken) */
    return 0;
  size_t want =
      need <= FIRST_BLOCK && d->len > FIRST_BLOCK ? FIRST_BLOCK : d->len;
  uint8_t *b = sluice__bigbuf_get(want + SLUICE__FRAME_HEADER_LEN);
  if (!b)
    return -1;
  if (d->filled)
    memcpy(b + SLUICE__FRAME_HEADER_LEN, d->buf + SLUICE__FRAME_HEADER_LEN,
           d->filled);
  sluice__bigbuf_put(d->buf);
  d->buf = b;
  d->cap = want;
  return 0;
}

/* After a message in buf was delivered: a large buffer goes back to the
 * cache rather than staying with a stream that may idle for hours (small
 * ones are kept for the stream's next message). */
static void release_large(sluice__deframer *d) {
  if (d->cap >= SLUICE__BIGBUF_MIN) {
    sluice__bigbuf_put(d->buf);
    d->buf = NULL;
    d->cap = 0;
  }
}

sluice_status_code sluice__deframer_feed(sluice__deframer *d,
                                         const uint8_t *data, size_t len,
                                         sluice__message_cb cb, void *ud,
                                         const char **reason) {
  if (d->err != SLUICE_STATUS_OK) {
    if (reason != NULL)
      *reason = d->err_reason;
    return d->err;
  }
  size_t pos = 0;
  for (;;) {
    /* Prefix: complete it first, however it is split. */
    if (d->hdr_filled < SLUICE__FRAME_HEADER_LEN) {
      if (pos == len)
        return SLUICE_STATUS_OK;
      size_t take = SLUICE__FRAME_HEADER_LEN - d->hdr_filled;
      if (take > len - pos)
        take = len - pos;
      memcpy(d->hdr + d->hdr_filled, data + pos, take);
      d->hdr_filled = (uint8_t)(d->hdr_filled + take);
      pos += take;
      /* Checked as soon as it arrives: nothing after a bad flag makes sense. */
      if (d->hdr[0] > 1)
        return fail(d, SLUICE_STATUS_INTERNAL,
                    "invalid compressed flag in message prefix", reason);
      if (d->hdr_filled < SLUICE__FRAME_HEADER_LEN)
        return SLUICE_STATUS_OK;
      sluice_status_code rc = start_message(d, reason);
      if (rc != SLUICE_STATUS_OK)
        return rc;
    }

    /* Body. A zero-length message completes as soon as its prefix does, even
     * at the very end of a chunk. */
    const uint8_t *msg;
    if (d->filled == 0 && len - pos >= d->len) {
      msg = data + pos; /* whole message in this chunk: no copy */
      pos += d->len;
    } else {
      if (pos == len)
        return SLUICE_STATUS_OK;
      size_t take = d->len - d->filled;
      if (take > len - pos)
        take = len - pos;
      if (reserve(d, d->filled + take) != 0)
        return fail(d, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                    "out of memory for received message", reason);
      memcpy(d->buf + SLUICE__FRAME_HEADER_LEN + d->filled, data + pos, take);
      d->filled += take;
      pos += take;
      if (d->filled < d->len)
        return SLUICE_STATUS_OK;
      msg = d->buf + SLUICE__FRAME_HEADER_LEN;
    }

    d->hdr_filled = 0;
    d->filled = 0;
    int stop = cb(ud, d->compressed, msg, d->len);
    if (d->buf && msg == d->buf + SLUICE__FRAME_HEADER_LEN)
      release_large(d);
    if (stop != 0)
      return fail(d, SLUICE_STATUS_CANCELLED, "message consumer stopped",
                  reason);
  }
}

uint8_t *sluice__deframer_take(sluice__deframer *d, const uint8_t *msg) {
  if (!d->buf || msg != d->buf + SLUICE__FRAME_HEADER_LEN)
    return NULL;
  uint8_t *block = d->buf;
  d->buf = NULL;
  d->cap = 0;
  return block;
}

int sluice__deframer_partial(const sluice__deframer *d) {
  return d->hdr_filled != 0;
}

uint32_t sluice__deframer_last_len(const sluice__deframer *d) {
  return d->last_len;
}
