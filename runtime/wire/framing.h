/* gRPC Length-Prefixed-Message framing: a 1-byte compressed flag, a 4-byte
 * big-endian length, then the message. DATA frame boundaries have nothing to
 * do with message boundaries, so the deframer reassembles across any split. */
#ifndef SLUICE_WIRE_FRAMING_H
#define SLUICE_WIRE_FRAMING_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/status.h>

#define SLUICE__FRAME_HEADER_LEN 5

/* Writes the 5-byte prefix of a message of len bytes. */
void sluice__frame_header(uint8_t out[SLUICE__FRAME_HEADER_LEN], int compressed,
                          uint32_t len);

/* Reassembly state of one direction of one stream. Fields are private. */
typedef struct sluice__deframer {
  uint8_t hdr[SLUICE__FRAME_HEADER_LEN]; /* prefix bytes received so far */
  uint8_t hdr_filled;                    /* 0..5 */
  uint8_t compressed;                    /* flag of the current message */
  uint32_t len;      /* declared length of the current message */
  uint8_t *buf;      /* reassembly block (malloc'd): the message goes at buf +
                        SLUICE__FRAME_HEADER_LEN, so that a message taken from
                        here can be sent on with its prefix written in front */
  size_t cap;        /* message bytes buf has room for */
  size_t filled;     /* message bytes in buf */
  uint32_t max_size; /* largest message accepted */
  uint32_t last_len; /* declared length that exceeded max_size, else 0 */
  sluice_status_code err; /* sticky: once not OK, every feed returns it */
  const char *err_reason;
} sluice__deframer;

/* Called for each complete message. msg is borrowed: valid only during the
 * call (it may point into the fed data or into the deframer's buffer).
 * Returns 0 to continue, non-zero to stop feeding. */
typedef int (*sluice__message_cb)(void *ud, int compressed, const uint8_t *msg,
                                  size_t len);

/* Prepares an empty deframer accepting messages of up to max_size bytes. */
void sluice__deframer_init(sluice__deframer *d, uint32_t max_size);

/* Frees the buffer and forgets any partial message and error; max_size is
 * kept. */
void sluice__deframer_reset(sluice__deframer *d);

/* Feeds len bytes of a stream's DATA and calls cb for every message they
 * complete. A message contained whole in data is passed without a copy.
 *
 * Returns SLUICE_STATUS_OK, or with *reason (static) set:
 *  - RESOURCE_EXHAUSTED: a declared length exceeds max_size (the length is
 *    in sluice__deframer_last_len()), or no memory for the message;
 *  - INTERNAL: a flag byte other than 0 or 1;
 *  - CANCELLED: cb returned non-zero (the rest of data is not consumed).
 * Errors are sticky: further feeds return the same code without reading. */
sluice_status_code sluice__deframer_feed(sluice__deframer *d,
                                         const uint8_t *data, size_t len,
                                         sluice__message_cb cb, void *ud,
                                         const char **reason);

/* Called from inside the message callback with its msg: when msg is in
 * the reassembly buffer, hands that block over (malloc'd, the caller's to
 * free; msg is at block + SLUICE__FRAME_HEADER_LEN) and returns it, so a
 * large message reaches its consumer without a copy; the deframer gets a
 * new buffer for the next one. NULL when msg points into the fed data (a
 * message whole in one chunk): copy it. */
uint8_t *sluice__deframer_take(sluice__deframer *d, const uint8_t *msg);

/* Non-zero when part of a message (or of its prefix) has been received; at
 * end of stream that is an INTERNAL "truncated message". */
int sluice__deframer_partial(const sluice__deframer *d);

/* The declared length that made feed return RESOURCE_EXHAUSTED for being over
 * max_size; 0 if that did not happen. */
uint32_t sluice__deframer_last_len(const sluice__deframer *d);

#endif
