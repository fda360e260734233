/* Message buffers (sluice/buf.h, transport/buf.h). */
#include "transport/buf.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/bigbuf.h"
#include "sluice/status.h"

sluice_buf *sluice__buf_wrap(uint8_t *block, size_t len) {
  sluice_buf *b = sluice__malloc(sizeof *b);
  if (!b)
    return NULL;
  b->block = block;
  b->len = len;
  return b;
}

static sluice_buf *buf_alloc(size_t len) {
  uint8_t *block = sluice__bigbuf_get(len + SLUICE__FRAME_HEADER_LEN);
  if (!block)
    return NULL;
  sluice_buf *b = sluice__buf_wrap(block, len);
  if (!b)
    sluice__bigbuf_put(block);
  return b;
}

sluice_buf *sluice__buf_copy(const uint8_t *data, size_t len) {
  sluice_buf *b = buf_alloc(len);
  if (b && len)
    memcpy(b->block + SLUICE__FRAME_HEADER_LEN, data, len);
  return b;
}

void sluice__buf_forget(sluice_buf *b) { free(b); }

int sluice_buf_new(size_t len, sluice_buf **out) {
  if (!out || len > UINT32_MAX)
    return SLUICE_ERR_INVALID_ARG;
  sluice_buf *b = buf_alloc(len);
  if (!b)
    return SLUICE_ERR_NOMEM;
  *out = b;
  return 0;
}

int sluice_buf_pack(const ProtobufCMessage *msg, sluice_buf **out) {
  if (!msg || !out)
    return SLUICE_ERR_INVALID_ARG;
  size_t len = protobuf_c_message_get_packed_size(msg);
  if (len > UINT32_MAX)
    return SLUICE_ERR_TOO_LARGE;
  sluice_buf *b = buf_alloc(len);
  if (!b)
    return SLUICE_ERR_NOMEM;
  protobuf_c_message_pack(msg, b->block + SLUICE__FRAME_HEADER_LEN);
  *out = b;
  return 0;
}

uint8_t *sluice_buf_data(sluice_buf *b) {
  return b ? b->block + SLUICE__FRAME_HEADER_LEN : NULL;
}

size_t sluice_buf_len(const sluice_buf *b) { return b ? b->len : 0; }

int sluice_buf_truncate(sluice_buf *b, size_t len) {
  if (!b || len > b->len)
    return SLUICE_ERR_INVALID_ARG;
  b->len = len;
  return 0;
}

void sluice_buf_free(sluice_buf *b) {
  if (!b)
    return;
  sluice__bigbuf_put(b->block);
  free(b);
}
