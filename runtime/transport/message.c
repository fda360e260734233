#include "transport/message.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/bigbuf.h"
#include "transport/buf.h"
#include "wire/compress.h"
#include "wire/framing.h"

/* The framed, compressed form of plain[0..len): a new [prefix | body]
 * block in *out (flag set). */
static int compress_framed(sluice_compression c, const uint8_t *plain,
                           size_t len, uint8_t **out, size_t *out_len) {
  uint8_t *z;
  size_t zlen;
  int rv = sluice__compress(c, plain, len, SLUICE__FRAME_HEADER_LEN, &z, &zlen);
  if (rv != 0)
    return rv;
  if (zlen > UINT32_MAX) {
    free(z);
    return SLUICE_ERR_TOO_LARGE;
  }
  sluice__frame_header(z, 1, (uint32_t)zlen);
  *out = z;
  *out_len = zlen + SLUICE__FRAME_HEADER_LEN;
  return 0;
}

int sluice__msg_pack(const ProtobufCMessage *msg, sluice_compression c,
                     uint32_t max, uint8_t **out, size_t *out_len,
                     size_t *size_out) {
  size_t len = protobuf_c_message_get_packed_size(msg);
  if (size_out)
    *size_out = len;
  if ((max && len > max) || len > UINT32_MAX)
    return SLUICE_ERR_TOO_LARGE;
  if (c == SLUICE_COMPRESS_NONE) {
    uint8_t *b = sluice__bigbuf_get(len + SLUICE__FRAME_HEADER_LEN);
    if (!b)
      return SLUICE_ERR_NOMEM;
    sluice__frame_header(b, 0, (uint32_t)len);
    protobuf_c_message_pack(msg, b + SLUICE__FRAME_HEADER_LEN);
    *out = b;
    *out_len = len + SLUICE__FRAME_HEADER_LEN;
    return 0;
  }
  uint8_t *plain = sluice__malloc(len ? len : 1);
  if (!plain)
    return SLUICE_ERR_NOMEM;
  protobuf_c_message_pack(msg, plain);
  int rv = compress_framed(c, plain, len, out, out_len);
  free(plain);
  return rv;
}

/* Decompresses a compressed message into *plain (bigbuf_put it), or says
 * why it cannot be: the rules both the protobuf and the raw path follow. */
static sluice_status_code inflate(int enc_ok, sluice_compression enc,
                                  const uint8_t *data, size_t len, uint32_t max,
                                  uint8_t **plain, size_t *plen, char *err,
                                  size_t errlen) {
  if (!enc_ok || enc == SLUICE_COMPRESS_NONE) {
    snprintf(err, errlen, "compressed message without a usable grpc-encoding");
    return SLUICE_STATUS_INTERNAL;
  }
  const char *reason = "";
  sluice_status_code code =
      sluice__decompress(enc, data, len, max, plain, plen, &reason);
  if (code == SLUICE_STATUS_RESOURCE_EXHAUSTED)
    snprintf(err, errlen,
             "decompressed message larger than max (over %" PRIu32 " bytes)",
             max);
  else if (code != SLUICE_STATUS_OK)
    snprintf(err, errlen, "cannot decompress message: %s", reason);
  return code;
}

sluice_status_code sluice__msg_unpack(const ProtobufCMessageDescriptor *desc,
                                      int compressed, int enc_ok,
                                      sluice_compression enc,
                                      const uint8_t *data, size_t len,
                                      uint32_t max, ProtobufCMessage **out,
                                      char *err, size_t errlen) {
  uint8_t *plain = NULL;
  size_t plen = len;
  *out = NULL;
  if (compressed) {
    sluice_status_code code =
        inflate(enc_ok, enc, data, len, max, &plain, &plen, err, errlen);
    if (code != SLUICE_STATUS_OK)
      return code;
    data = plain;
  }
  *out = protobuf_c_message_unpack(desc, sluice__bigbuf_pb_allocator(), plen,
                                   data);
  sluice__bigbuf_put(plain);
  if (!*out) {
    snprintf(err, errlen, "failed to parse message (%zu bytes) as %s", plen,
             desc->name);
    return SLUICE_STATUS_INTERNAL;
  }
  return SLUICE_STATUS_OK;
}

sluice_status_code
sluice__msg_to_buf(int compressed, int enc_ok, sluice_compression enc,
                   const uint8_t *data, size_t len, uint32_t max,
                   uint8_t *block, sluice_buf **out, char *err, size_t errlen) {
  *out = NULL;
  if (!compressed) {
    /* Reassembled: its block handed over; whole in one chunk: copied. */
    *out = block ? sluice__buf_wrap(block, len) : sluice__buf_copy(data, len);
    if (!*out)
      sluice__bigbuf_put(block);
  } else {
    /* data may point into block: inflated before the block goes. The
     * result has no room for a prefix in front, so it is copied. */
    uint8_t *plain = NULL;
    size_t plen = len;
    sluice_status_code code =
        inflate(enc_ok, enc, data, len, max, &plain, &plen, err, errlen);
    if (code == SLUICE_STATUS_OK)
      *out = sluice__buf_copy(plain, plen);
    sluice__bigbuf_put(plain);
    sluice__bigbuf_put(block);
    if (code != SLUICE_STATUS_OK)
      return code;
  }
  if (!*out) {
    snprintf(err, errlen, "out of memory for a received message");
    return SLUICE_STATUS_RESOURCE_EXHAUSTED;
  }
  return SLUICE_STATUS_OK;
}

int sluice__msg_frame_buf(sluice_buf *b, sluice_compression c, uint32_t max,
                          uint8_t **out, size_t *out_len, size_t *size_out) {
  if (size_out)
    *size_out = b->len;
  if ((max && b->len > max) || b->len > UINT32_MAX)
    return SLUICE_ERR_TOO_LARGE;
  if (c == SLUICE_COMPRESS_NONE) {
    sluice__frame_header(b->block, 0, (uint32_t)b->len);
    *out = b->block;
    *out_len = b->len + SLUICE__FRAME_HEADER_LEN;
    return 0;
  }
  return compress_framed(c, b->block + SLUICE__FRAME_HEADER_LEN, b->len, out,
                         out_len);
}

void sluice__msg_frame_drop(sluice_buf *b, uint8_t *out) {
  if (out != b->block)
    sluice__bigbuf_put(out);
}

void sluice__msg_framed(sluice_buf *b, const uint8_t *out) {
  if (out == b->block)
    sluice__buf_forget(b);
  else
    sluice_buf_free(b);
}
