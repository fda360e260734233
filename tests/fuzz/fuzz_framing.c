/* The gRPC deframer: a stream of length-prefixed messages fed in chunks
 * whose sizes come from the fuzzer, against a reference reading of the same
 * bytes in one pass.
 *
 * Input: [mode] [nsplit] [nsplit chunk sizes] [stream bytes...]
 *   mode bits 0-2: max_size (one of `limits`); bit 3: take every reassembled
 *   message with sluice__deframer_take; bits 4-7: when not 0, the callback
 *   asks to stop at that (1-based) message.
 * Invariants: the callbacks are exactly the reference's messages, in order,
 * each once, with its flag, length and bytes; the result is the reference's
 * (OK, INTERNAL for a bad flag, RESOURCE_EXHAUSTED with last_len for a
 * length over max_size, CANCELLED when the callback stopped) and stays
 * sticky; partial() is set exactly when bytes of an unfinished message
 * remain; a message not in the reassembly buffer lies inside the chunk just
 * fed; and re-framing the messages with sluice__frame_header yields a
 * stream that deframes to the same messages in one feed. */
#include "fuzz.h"

#include "core/bigbuf.h"
#include "wire/framing.h"

/* Small limits, and both sides of the size where a reassembled message's
 * block goes back to the cache (SLUICE__BIGBUF_MIN). Nothing larger: the
 * deframer reserves a message's declared length as soon as it spans
 * chunks, so a 6-byte prefix costs a block of max_size, and multi-MiB
 * limits only slow every execution down (measured: 4 MiB, a fifth of the
 * rate) without reaching any other code. */
static const uint32_t limits[8] = {0, 1, 5, 100, 1000, 65530, 65536, 200000};

typedef struct msg_ref {
  size_t off; /* in the stream */
  uint32_t len;
  int compressed;
} msg_ref;

typedef struct run {
  const uint8_t *stream;
  const msg_ref *want;
  size_t n_want;
  size_t seen;
  size_t stop_at; /* 1-based; 0: never stop */
  int take;
  sluice__deframer *d;
  const uint8_t *chunk; /* the chunk being fed */
  size_t chunk_len;
} run;

static int on_message(void *ud, int compressed, const uint8_t *msg,
                      size_t len) {
  run *r = ud;
  FUZZ_CHECK(r->seen < r->n_want);
  const msg_ref *w = &r->want[r->seen++];
  FUZZ_CHECK(compressed == w->compressed);
  FUZZ_CHECK(len == w->len);
  FUZZ_CHECK(len == 0 || memcmp(msg, r->stream + w->off, len) == 0);
  int in_chunk = msg >= r->chunk && msg + len <= r->chunk + r->chunk_len;
  if (r->take) {
    uint8_t *block = sluice__deframer_take(r->d, msg);
    /* NULL exactly when the message was passed straight from the chunk. */
    if (block) {
      FUZZ_CHECK(block + SLUICE__FRAME_HEADER_LEN == msg);
      FUZZ_CHECK(!in_chunk || len == 0);
      /* The block is ours now: its message must stay intact. */
      FUZZ_CHECK(len == 0 || memcmp(block + SLUICE__FRAME_HEADER_LEN,
                                    r->stream + w->off, len) == 0);
      sluice__bigbuf_put(block);
    } else {
      FUZZ_CHECK(in_chunk);
    }
  }
  return r->stop_at != 0 && r->seen == r->stop_at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_in in = {data, size};
  uint8_t mode = fuzz_u8(&in);
  size_t nsplit = fuzz_u8(&in);
  if (nsplit > in.n)
    nsplit = in.n;
  const uint8_t *splits = in.p;
  in.p += nsplit;
  in.n -= nsplit;
  uint32_t max = limits[mode & 7];
  const uint8_t *stream = in.p;
  size_t len = in.n;

  /* The reference: one pass over the whole stream. */
  msg_ref *want = malloc((len / SLUICE__FRAME_HEADER_LEN + 1) * sizeof *want);
  FUZZ_CHECK(want != NULL);
  size_t n_want = 0, pos = 0;
  sluice_status_code want_rc = SLUICE_STATUS_OK;
  uint32_t want_last = 0;
  size_t stop_at = mode >> 4;
  for (;;) {
    if (pos < len && stream[pos] > 1) {
      want_rc = SLUICE_STATUS_INTERNAL;
      break;
    }
    if (len - pos < SLUICE__FRAME_HEADER_LEN)
      break;
    uint32_t mlen = (uint32_t)stream[pos + 1] << 24 |
                    (uint32_t)stream[pos + 2] << 16 |
                    (uint32_t)stream[pos + 3] << 8 | stream[pos + 4];
    if (mlen > max) {
      want_rc = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      want_last = mlen;
      break;
    }
    if (len - pos - SLUICE__FRAME_HEADER_LEN < mlen)
      break;
    want[n_want++] =
        (msg_ref){pos + SLUICE__FRAME_HEADER_LEN, mlen, stream[pos]};
    pos += SLUICE__FRAME_HEADER_LEN + mlen;
    if (stop_at && n_want == stop_at) {
      want_rc = SLUICE_STATUS_CANCELLED;
      break;
    }
  }
  int want_partial = want_rc == SLUICE_STATUS_OK && pos < len;

  sluice__deframer d;
  sluice__deframer_init(&d, max);
  run r = {stream, want, n_want, 0, stop_at, (mode >> 3) & 1, &d, NULL, 0};
  sluice_status_code first_err = SLUICE_STATUS_OK;
  const char *first_reason = NULL;
  size_t off = 0, k = 0, zeros = 0;
  do {
    /* Chunk sizes cycle through the split bytes; none: one feed. A 0 is an
     * empty feed (an empty DATA frame), which must change nothing; after a
     * whole cycle of them the rest goes in one feed. */
    size_t c = nsplit ? splits[k++ % nsplit] : len - off;
    if (c == 0 && ++zeros > nsplit)
      c = len - off;
    else if (c != 0)
      zeros = 0;
    if (c > len - off)
      c = len - off;
    uint8_t *chunk = fuzz_dup(stream + off, c);
    r.chunk = chunk;
    r.chunk_len = c;
    const char *reason = NULL;
    size_t seen_before = r.seen;
    sluice_status_code rc =
        sluice__deframer_feed(&d, chunk, c, on_message, &r, &reason);
    free(chunk);
    if (first_err != SLUICE_STATUS_OK) {
      /* Sticky: the same code and reason, and nothing more delivered. */
      FUZZ_CHECK(rc == first_err);
      FUZZ_CHECK(reason == first_reason);
      FUZZ_CHECK(r.seen == seen_before);
    } else if (rc != SLUICE_STATUS_OK) {
      FUZZ_CHECK(reason != NULL && reason[0] != '\0');
      first_err = rc;
      first_reason = reason;
    }
    off += c;
  } while (off < len);

  FUZZ_CHECK(first_err == want_rc);
  FUZZ_CHECK(r.seen == n_want);
  FUZZ_CHECK(sluice__deframer_last_len(&d) == want_last);
  if (want_rc == SLUICE_STATUS_OK)
    FUZZ_CHECK(!!sluice__deframer_partial(&d) == want_partial);
  sluice__deframer_reset(&d);
  FUZZ_CHECK(!sluice__deframer_partial(&d));

  /* decode(encode(x)) == x: the messages framed again, fed in one go. */
  size_t total = 0;
  for (size_t i = 0; i < n_want; i++)
    total += SLUICE__FRAME_HEADER_LEN + want[i].len;
  uint8_t *again = malloc(total ? total : 1);
  FUZZ_CHECK(again != NULL);
  size_t o = 0;
  for (size_t i = 0; i < n_want; i++) {
    sluice__frame_header(again + o, want[i].compressed, want[i].len);
    memcpy(again + o + SLUICE__FRAME_HEADER_LEN, stream + want[i].off,
           want[i].len);
    o += SLUICE__FRAME_HEADER_LEN + want[i].len;
  }
  FUZZ_CHECK(o == 0 || memcmp(again, stream, o) == 0);
  sluice__deframer_init(&d, max);
  run r2 = {stream, want, n_want, 0, 0, 0, &d, again, total};
  FUZZ_CHECK(sluice__deframer_feed(&d, again, total, on_message, &r2, NULL) ==
             SLUICE_STATUS_OK);
  FUZZ_CHECK(r2.seen == n_want);
  FUZZ_CHECK(!sluice__deframer_partial(&d));
  sluice__deframer_reset(&d);
  free(again);
  free(want);
  return 0;
}
