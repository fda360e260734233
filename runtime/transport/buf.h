/* The public message buffer (sluice/buf.h) from the inside: a malloc'd
 * block with SLUICE__FRAME_HEADER_LEN bytes of room in front of the
 * message, so that the block itself, prefix written, can be queued for
 * sending (sendq.h takes [prefix | message] blocks) and a reassembled
 * message (framing.h keeps the same room) can become a buffer without a
 * copy. */
#ifndef SLUICE_TRANSPORT_BUF_H
#define SLUICE_TRANSPORT_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/buf.h"
#include "wire/framing.h"

struct sluice_buf {
  uint8_t *block; /* [room for the prefix | len bytes of message] */
  size_t len;
};

/* A buffer around block (malloc'd, the message of len bytes at block +
 * SLUICE__FRAME_HEADER_LEN), which it then owns. NULL when out of memory
 * (block is then still the caller's). */
sluice_buf *sluice__buf_wrap(uint8_t *block, size_t len);

/* A new buffer holding a copy of data[0..len), or NULL. */
sluice_buf *sluice__buf_copy(const uint8_t *data, size_t len);

/* Frees b but not its block, which the caller has taken (the send queue
 * owns it now). */
void sluice__buf_forget(sluice_buf *b);

#endif
