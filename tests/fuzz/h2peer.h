/* The peer of the whole-connection targets (fuzz_server_conn.c,
 * fuzz_client_conn.c): HTTP/2 frames built from the fuzzer's input and
 * written into the connection's socket, one op at a time, with the
 * connection's loop run in between (the caller's pump) so that what the
 * connection answers, and when, interleaves with what the peer sends.
 *
 * The input, after whatever the target reads first, is a list of ops. An
 * op is one byte: its low 4 bits the kind, bit 7 "do not pump after this
 * one" (the next op's bytes then arrive in the same read). Kinds:
 *
 *   0 HEADERS       [flags][sid] then header lines up to an empty line
 *                   ("name: value", as fuzz_next_header), HPACK-encoded
 *                   with one deflater per connection (so its dynamic
 *                   table stays in step with the receiver's). flags bit 0
 *                   END_STREAM, bit 1: split into HEADERS + CONTINUATION,
 *                   bit 2: no END_HEADERS at all (a block left open)
 *   1 DATA message  [flags][sid][mflag][len16][len bytes]: one gRPC
 *                   message (5-byte prefix, mflag its compressed flag) in
 *                   one DATA frame; flags bit 0 END_STREAM
 *   2 DATA raw      [flags][sid][len16][len bytes]
 *   3 RST_STREAM    [sid][code]
 *   4 WINDOW_UPDATE [sid][u32 increment]
 *   5 PING          [flags][8 bytes]
 *   6 SETTINGS      [flags][n][n x (u16 id, u32 value)]
 *   7 GOAWAY        [sid: last stream][code][debug len8][bytes]
 *   8 any frame     [type][flags][sid][len16][len bytes]
 *   9 raw bytes     [len16][len bytes], written as they are
 *  10 PRIORITY      [sid][5 bytes]
 *  11 target's own  (the target's hook: release held calls, cancel ...)
 *  12-14            pump only (more loop turns)
 *  15 wait          the first one of an input sleeps 2 ms before it
 *                   pumps, so that timers of a few ms (a grpc-timeout of
 *                   1m, a 1 ms call deadline) fire; later ones only pump
 *
 * sid: a stream id from one byte: bit 7 set, the low 7 bits as they are
 * (0, even ids, ids out of order); clear, 2 * b + 1 (the odd ids a client
 * opens, 1, 3, 5 ... for 0, 1, 2 ...). A read past the end of the input
 * gives zeros, so a truncated op is still an op. */
#ifndef SLUICE_FUZZ_H2PEER_H
#define SLUICE_FUZZ_H2PEER_H

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define H2PEER_MAX_NV 64
#define H2PEER_MAX_WRITE (1u << 20) /* bytes one input may write */

typedef struct h2peer h2peer;
/* Runs the connection's loop for a few turns (and drains, accepts ...). */
typedef void (*h2peer_pump_fn)(h2peer *p);
/* The target's own op (kind 11), reading its arguments from in. */
typedef void (*h2peer_hook_fn)(h2peer *p, fuzz_in *in);

struct h2peer {
  int fd; /* the peer's end of the connection's socket; -1: gone */
  uint8_t *out;
  size_t n, cap;
  size_t written; /* in all, bounded by H2PEER_MAX_WRITE */
  nghttp2_hd_deflater *deflater;
  h2peer_pump_fn pump;
  h2peer_hook_fn hook;
  void *ud;
  uint64_t drained; /* bytes the connection wrote, read and dropped */
  int slept;        /* op 15 slept already */
  int eof;          /* the connection closed its side */
};

static inline void h2peer_init(h2peer *p, int fd, h2peer_pump_fn pump,
                               h2peer_hook_fn hook, void *ud) {
  memset(p, 0, sizeof *p);
  p->fd = fd;
  p->pump = pump;
  p->hook = hook;
  p->ud = ud;
  if (nghttp2_hd_deflate_new(&p->deflater, 4096) != 0)
    abort();
}

static inline void h2peer_free(h2peer *p) {
  nghttp2_hd_deflate_del(p->deflater);
  free(p->out);
  if (p->fd >= 0)
    close(p->fd);
  p->fd = -1;
  p->out = NULL;
}

static inline void h2peer_put(h2peer *p, const void *data, size_t len) {
  if (p->n + len > p->cap) {
    size_t cap = (p->n + len) * 2;
    uint8_t *grown = realloc(p->out, cap);
    if (!grown)
      abort();
    p->out = grown;
    p->cap = cap;
  }
  if (len)
    memcpy(p->out + p->n, data, len);
  p->n += len;
}

static inline void h2peer_frame(h2peer *p, uint8_t type, uint8_t flags,
                                uint32_t id, const uint8_t *payload,
                                size_t len) {
  if (len > 16384)
    len = 16384; /* the default SETTINGS_MAX_FRAME_SIZE */
  uint8_t hd[9] = {(uint8_t)(len >> 16),
                   (uint8_t)(len >> 8),
                   (uint8_t)len,
                   type,
                   flags,
                   (uint8_t)(id >> 24),
                   (uint8_t)(id >> 16),
                   (uint8_t)(id >> 8),
                   (uint8_t)id};
  h2peer_put(p, hd, 9);
  h2peer_put(p, payload, len);
}

/* Reads and drops what the connection wrote. */
static inline void h2peer_drain(h2peer *p) {
  uint8_t buf[16384];
  while (p->fd >= 0 && !p->eof) {
    ssize_t k = recv(p->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (k > 0) {
      p->drained += (uint64_t)k;
      continue;
    }
    if (k == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
      p->eof = 1;
    if (k < 0 && errno == EINTR)
      continue;
    break;
  }
}

/* Writes what the ops built, pumping while the socket is full; a
 * connection that stopped reading (or closed) loses the rest. */
static inline void h2peer_flush(h2peer *p) {
  size_t at = 0;
  for (int stuck = 0; at < p->n && p->fd >= 0 && stuck < 64;) {
    ssize_t k =
        send(p->fd, p->out + at, p->n - at, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k > 0) {
      at += (size_t)k;
      stuck = 0;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      break; /* the connection is gone */
    stuck++;
    p->pump(p);
  }
  p->written += p->n;
  p->n = 0;
}

static inline uint32_t h2peer_sid(fuzz_in *in) {
  uint8_t b = fuzz_u8(in);
  return b & 0x80 ? b & 0x7fu : 2u * b + 1;
}

static inline size_t h2peer_len16(fuzz_in *in) {
  size_t len = (size_t)fuzz_u8(in) << 8;
  len |= fuzz_u8(in);
  return len < in->n ? len : in->n;
}

/* HEADERS (op 0). */
static inline void h2peer_headers(h2peer *p, fuzz_in *in) {
  uint8_t flags = fuzz_u8(in);
  uint32_t id = h2peer_sid(in);
  nghttp2_nv nv[H2PEER_MAX_NV];
  size_t n = 0;
  fuzz_header h;
  while (fuzz_next_header(in, &h) && !h.block_end) {
    if (n == H2PEER_MAX_NV)
      continue;
    nv[n].name = (uint8_t *)h.name;
    nv[n].namelen = h.nlen;
    nv[n].value = (uint8_t *)h.value;
    nv[n].valuelen = h.vlen;
    nv[n].flags = NGHTTP2_NV_FLAG_NONE;
    n++;
  }
  size_t bound = nghttp2_hd_deflate_bound(p->deflater, nv, n);
  uint8_t *block = malloc(bound ? bound : 1);
  if (!block)
    abort();
  ssize_t len = nghttp2_hd_deflate_hd(p->deflater, block, bound, nv, n);
  if (len < 0)
    len = 0;
  uint8_t f = flags & 1 ? NGHTTP2_FLAG_END_STREAM : 0;
  if (flags & 4) {
    h2peer_frame(p, NGHTTP2_HEADERS, f, id, block, (size_t)len);
  } else if (flags & 2) {
    size_t half = (size_t)len / 2;
    h2peer_frame(p, NGHTTP2_HEADERS, f, id, block, half);
    h2peer_frame(p, NGHTTP2_CONTINUATION, NGHTTP2_FLAG_END_HEADERS, id,
                 block + half, (size_t)len - half);
  } else {
    h2peer_frame(p, NGHTTP2_HEADERS, f | NGHTTP2_FLAG_END_HEADERS, id, block,
                 (size_t)len);
  }
  free(block);
}

/* Runs the ops of in (see the top of this file) until the input or the
 * write budget is used up, or the connection has closed its side. */
static inline void h2peer_run(h2peer *p, fuzz_in *in) {
  while (in->n > 0 && p->written < H2PEER_MAX_WRITE && !p->eof) {
    uint8_t op = fuzz_u8(in);
    switch (op & 15) {
    case 0:
      h2peer_headers(p, in);
      break;
    case 1: {
      uint8_t flags = fuzz_u8(in);
      uint32_t id = h2peer_sid(in);
      uint8_t m = fuzz_u8(in);
      size_t len = h2peer_len16(in);
      if (len > 16384 - 5)
        len = 16384 - 5;
      uint8_t *buf = malloc(len + 5);
      if (!buf)
        abort();
      buf[0] = m;
      buf[1] = (uint8_t)(len >> 24);
      buf[2] = (uint8_t)(len >> 16);
      buf[3] = (uint8_t)(len >> 8);
      buf[4] = (uint8_t)len;
      memcpy(buf + 5, in->p, len);
      in->p += len;
      in->n -= len;
      h2peer_frame(p, NGHTTP2_DATA, flags & 1 ? NGHTTP2_FLAG_END_STREAM : 0, id,
                   buf, len + 5);
      free(buf);
      break;
    }
    case 2: {
      uint8_t flags = fuzz_u8(in);
      uint32_t id = h2peer_sid(in);
      size_t len = h2peer_len16(in);
      h2peer_frame(p, NGHTTP2_DATA, flags & 1 ? NGHTTP2_FLAG_END_STREAM : 0, id,
                   in->p, len);
      in->p += len;
      in->n -= len;
      break;
    }
    case 3: {
      uint32_t id = h2peer_sid(in);
      uint8_t code[4] = {0, 0, 0, fuzz_u8(in)};
      h2peer_frame(p, NGHTTP2_RST_STREAM, 0, id, code, 4);
      break;
    }
    case 4: {
      uint32_t id = h2peer_sid(in);
      uint8_t inc[4];
      for (int i = 0; i < 4; i++)
        inc[i] = fuzz_u8(in);
      h2peer_frame(p, NGHTTP2_WINDOW_UPDATE, 0, id, inc, 4);
      break;
    }
    case 5: {
      uint8_t flags = fuzz_u8(in);
      uint8_t data[8];
      for (int i = 0; i < 8; i++)
        data[i] = fuzz_u8(in);
      h2peer_frame(p, NGHTTP2_PING, flags & 1 ? NGHTTP2_FLAG_ACK : 0, 0, data,
                   8);
      break;
    }
    case 6: {
      uint8_t flags = fuzz_u8(in);
      uint8_t n = fuzz_u8(in) & 7;
      uint8_t iv[7 * 6];
      for (int i = 0; i < n * 6; i++)
        iv[i] = fuzz_u8(in);
      if (flags & 1)
        h2peer_frame(p, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
      else
        h2peer_frame(p, NGHTTP2_SETTINGS, 0, 0, iv, (size_t)n * 6);
      break;
    }
    case 7: {
      uint32_t last = h2peer_sid(in);
      uint8_t code = fuzz_u8(in);
      uint8_t dlen = fuzz_u8(in);
      uint8_t buf[8 + 255];
      buf[0] = (uint8_t)(last >> 24);
      buf[1] = (uint8_t)(last >> 16);
      buf[2] = (uint8_t)(last >> 8);
      buf[3] = (uint8_t)last;
      buf[4] = buf[5] = buf[6] = 0;
      buf[7] = code;
      for (int i = 0; i < dlen; i++)
        buf[8 + i] = fuzz_u8(in);
      h2peer_frame(p, NGHTTP2_GOAWAY, 0, 0, buf, 8u + dlen);
      break;
    }
    case 8: {
      uint8_t type = fuzz_u8(in);
      uint8_t flags = fuzz_u8(in);
      uint32_t id = h2peer_sid(in);
      size_t len = h2peer_len16(in);
      h2peer_frame(p, type, flags, id, in->p, len);
      in->p += len;
      in->n -= len;
      break;
    }
    case 9: {
      size_t len = h2peer_len16(in);
      h2peer_put(p, in->p, len);
      in->p += len;
      in->n -= len;
      break;
    }
    case 10: {
      uint32_t id = h2peer_sid(in);
      uint8_t pri[5];
      for (int i = 0; i < 5; i++)
        pri[i] = fuzz_u8(in);
      h2peer_frame(p, NGHTTP2_PRIORITY, 0, id, pri, 5);
      break;
    }
    case 11:
      if (p->hook)
        p->hook(p, in);
      break;
    case 15:
      if (!p->slept) {
        p->slept = 1;
        h2peer_flush(p);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
      }
      break;
    default:
      break;
    }
    if (!(op & 0x80)) {
      h2peer_flush(p);
      p->pump(p);
    }
  }
  h2peer_flush(p);
  p->pump(p);
}

/* What both connection targets do once connected: the peer's SETTINGS and
 * the ACK of the connection's, then the input, as raw bytes (raw) or as
 * ops, with the connection's loop pumped in between. */
static inline void h2peer_play(h2peer *p, fuzz_in *in, int raw) {
  h2peer_frame(p, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
  h2peer_frame(p, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
  if (raw)
    h2peer_put(p, in->p, in->n);
  h2peer_flush(p);
  p->pump(p);
  if (!raw)
    h2peer_run(p, in);
}

#endif
