/* gzip message compression through zlib, and the grpc-encoding names. */
#include "wire/compress.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include <zlib.h>

/* windowBits for zlib: 15 (32 KiB window) + 16 = gzip wrapper only. Raw zlib
 * streams are refused on inflate (15 + 32 would auto-detect them). */
#define GZIP_WINDOW_BITS (15 + 16)

/* First output buffer of an inflate, unless max is smaller. */
#define INFLATE_MIN_START 4096

/* zlib counts in uInt: hand it at most this much per call. */
static uInt chunk(size_t n) { return n > UINT_MAX ? UINT_MAX : (uInt)n; }

int sluice__compress(sluice_compression c, const uint8_t *in, size_t len,
                     size_t reserve, uint8_t **out, size_t *out_len) {
  if (c != SLUICE_COMPRESS_GZIP || out == NULL || out_len == NULL ||
      (in == NULL && len > 0))
    return SLUICE_ERR_INVALID_ARG;

  z_stream zs;
  memset(&zs, 0, sizeof zs);
  int rc = deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                        GZIP_WINDOW_BITS, 8, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK)
    return rc == Z_MEM_ERROR ? SLUICE_ERR_NOMEM : SLUICE_ERR_SYSTEM;

  /* deflateBound covers the gzip header and trailer: one Z_FINISH pass fits,
   * unless the sizes exceed what zlib counts in one call (then grow). */
  size_t cap = deflateBound(&zs, (uLong)len);
  if (cap > SIZE_MAX - reserve) {
    deflateEnd(&zs);
    return SLUICE_ERR_NOMEM;
  }
  uint8_t *buf = sluice__malloc(reserve + cap);
  if (buf == NULL) {
    deflateEnd(&zs);
    return SLUICE_ERR_NOMEM;
  }

  size_t in_done = 0, produced = 0;
  for (;;) {
    size_t in_left = len - in_done;
    zs.next_in = (Bytef *)(uintptr_t)(in + in_done); /* zlib is not const */
    zs.avail_in = chunk(in_left);
    zs.next_out = buf + reserve + produced;
    zs.avail_out = chunk(cap - produced);
    uInt in_given = zs.avail_in, out_given = zs.avail_out;
    rc = deflate(&zs, zs.avail_in == in_left ? Z_FINISH : Z_NO_FLUSH);
    in_done += in_given - zs.avail_in;
    produced += out_given - zs.avail_out;
    if (rc == Z_STREAM_END)
      break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      free(buf);
      deflateEnd(&zs);
      return SLUICE_ERR_SYSTEM;
    }
    if (produced == cap) { /* not expected after deflateBound */
      size_t more = cap < 4096 ? 4096 : cap;
      uint8_t *nb = more <= SIZE_MAX - reserve - cap
                        ? sluice__realloc(buf, reserve + cap + more)
                        : NULL;
      if (nb == NULL) {
        free(buf);
        deflateEnd(&zs);
        return SLUICE_ERR_NOMEM;
      }
      buf = nb;
      cap += more;
    }
  }
  deflateEnd(&zs);
  *out = buf;
  *out_len = produced;
  return 0;
}

static sluice_status_code fail(sluice_status_code code, const char *why,
                               const char **reason) {
  if (reason != NULL)
    *reason = why;
  return code;
}

/* Identity: a copy, with the same limit as gzip. */
static sluice_status_code copy_out(const uint8_t *in, size_t len, uint32_t max,
                                   uint8_t **out, size_t *out_len,
                                   const char **reason) {
  if (len > max)
    return fail(SLUICE_STATUS_RESOURCE_EXHAUSTED,
                "decompressed message larger than max", reason);
  uint8_t *buf = sluice__malloc(len > 0 ? len : 1);
  if (buf == NULL)
    return fail(SLUICE_STATUS_RESOURCE_EXHAUSTED, "out of memory", reason);
  if (len > 0)
    memcpy(buf, in, len);
  *out = buf;
  *out_len = len;
  return SLUICE_STATUS_OK;
}

sluice_status_code sluice__decompress(sluice_compression c, const uint8_t *in,
                                      size_t len, uint32_t max, uint8_t **out,
                                      size_t *out_len, const char **reason) {
  if (out == NULL || out_len == NULL || (in == NULL && len > 0))
    return fail(SLUICE_STATUS_INTERNAL, "invalid decompress arguments", reason);
  if (c == SLUICE_COMPRESS_NONE)
    return copy_out(in, len, max, out, out_len, reason);
  if (c != SLUICE_COMPRESS_GZIP)
    return fail(SLUICE_STATUS_INTERNAL, "unknown compression algorithm",
                reason);

  /* Output buffer of at most max + 1 bytes: filling it proves the message is
   * too large. */
  size_t limit;
#if SIZE_MAX > UINT32_MAX
  limit = (size_t)max + 1;
#else
  limit = max < SIZE_MAX ? (size_t)max + 1 : SIZE_MAX;
#endif
  size_t cap = len < limit / 2 ? 2 * len : limit;
  if (cap < INFLATE_MIN_START)
    cap = INFLATE_MIN_START < limit ? INFLATE_MIN_START : limit;

  z_stream zs;
  memset(&zs, 0, sizeof zs);
  int rc = inflateInit2(&zs, GZIP_WINDOW_BITS);
  if (rc != Z_OK)
    return fail(SLUICE_STATUS_RESOURCE_EXHAUSTED, "out of memory", reason);
  uint8_t *buf = sluice__malloc(cap);
  if (buf == NULL) {
    inflateEnd(&zs);
    return fail(SLUICE_STATUS_RESOURCE_EXHAUSTED, "out of memory", reason);
  }

  sluice_status_code code = SLUICE_STATUS_OK;
  const char *why = NULL;
  size_t in_done = 0, produced = 0;
  for (;;) {
    zs.next_in = (Bytef *)(uintptr_t)(in + in_done); /* zlib is not const */
    zs.avail_in = chunk(len - in_done);
    zs.next_out = buf + produced;
    zs.avail_out = chunk(cap - produced);
    uInt in_given = zs.avail_in, out_given = zs.avail_out;
    rc = inflate(&zs, Z_NO_FLUSH);
    in_done += in_given - zs.avail_in;
    produced += out_given - zs.avail_out;

    if (rc == Z_STREAM_END) {
      /* The last byte may land in the spare one past max. */
      if (produced > max) {
        code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
        why = "decompressed message larger than max";
      } else if (in_done != len) {
        code = SLUICE_STATUS_INTERNAL;
        why = "trailing data after gzip stream";
      }
      break;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      code = SLUICE_STATUS_INTERNAL;
      why = "corrupt gzip data";
      break;
    }
    if (rc == Z_MEM_ERROR) {
      code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      why = "out of memory";
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      code = SLUICE_STATUS_INTERNAL;
      why = "corrupt gzip data";
      break;
    }
    if (zs.avail_out == 0) {
      if (produced < cap)
        continue; /* more room than zlib takes in one call */
      /* Output full: more may follow. Grow, unless max + 1 bytes are in. */
      if (cap == limit) {
        code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
        why = "decompressed message larger than max";
        break;
      }
      size_t ncap = cap <= limit / 2 ? cap * 2 : limit;
      uint8_t *nb = sluice__realloc(buf, ncap);
      if (nb == NULL) {
        code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
        why = "out of memory";
        break;
      }
      buf = nb;
      cap = ncap;
    } else if (in_done == len) {
      /* Room left, all input read, and no end of stream. */
      code = SLUICE_STATUS_INTERNAL;
      why = "truncated gzip data";
      break;
    }
  }
  inflateEnd(&zs);
  if (code != SLUICE_STATUS_OK) {
    free(buf);
    return fail(code, why, reason);
  }
  if (produced < cap) { /* give back the slack; keep buf if that fails */
    uint8_t *nb = sluice__realloc(buf, produced > 0 ? produced : 1);
    if (nb != NULL)
      buf = nb;
  }
  *out = buf;
  *out_len = produced;
  return SLUICE_STATUS_OK;
}

static const char identity_name[] = "identity";
static const char gzip_name[] = "gzip";

static int token_is(const char *v, size_t len, const char *name) {
  size_t n = strlen(name);
  return len == n && memcmp(v, name, n) == 0;
}

int sluice__encoding_parse(const char *v, size_t len, sluice_compression *c) {
  if (v == NULL || c == NULL)
    return -1;
  if (token_is(v, len, identity_name)) {
    *c = SLUICE_COMPRESS_NONE;
    return 0;
  }
  if (token_is(v, len, gzip_name)) {
    *c = SLUICE_COMPRESS_GZIP;
    return 0;
  }
  return -1;
}

const char *sluice__encoding_name(sluice_compression c) {
  return c == SLUICE_COMPRESS_GZIP ? gzip_name : identity_name;
}

static int is_space(char ch) { return ch == ' ' || ch == '\t'; }

int sluice__accept_encoding_has(const char *v, size_t len,
                                sluice_compression c) {
  if (c == SLUICE_COMPRESS_NONE)
    return 1;
  if (c != SLUICE_COMPRESS_GZIP || v == NULL)
    return 0;
  const char *name = sluice__encoding_name(c);
  size_t i = 0;
  while (i < len) {
    size_t start = i;
    while (i < len && v[i] != ',')
      i++;
    size_t end = i;
    while (start < end && is_space(v[start]))
      start++;
    while (end > start && is_space(v[end - 1]))
      end--;
    if (token_is(v + start, end - start, name))
      return 1;
    i++; /* past the comma */
  }
  return 0;
}
