/* protoc-gen-sluice: (sluice.method) options, decoded with protoc-c's code
 * for options.proto so the plugin and users read the same schema. */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "sluice/options.pb-c.h"

/* protobuf-c keeps a length-delimited unknown field with its length
 * prefix (it re-emits the bytes verbatim when packing); returns the offset
 * of the payload after that varint, or 0 when it is malformed. */
static size_t payload_offset(const uint8_t *data, size_t len) {
  uint64_t value = 0;
  for (size_t i = 0; i < len && i < 10; i++) {
    value |= (uint64_t)(data[i] & 0x7f) << (7 * i);
    if ((data[i] & 0x80) == 0)
      return value == len - (i + 1) ? i + 1 : 0;
  }
  return 0;
}

int options_read_method(const Google__Protobuf__MethodOptions *opts,
                        method_defaults *out, const char **err) {
  memset(out, 0, sizeof *out);
  if (opts == NULL)
    return 0;

  /* A message-typed field may legally occur several times; the occurrences
   * merge, which is what parsing their concatenation does. */
  size_t total = 0, count = 0;
  for (unsigned i = 0; i < opts->base.n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *f = &opts->base.unknown_fields[i];
    if (f->tag != SLUICE_METHOD_OPTIONS_FIELD)
      continue;
    if (f->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) {
      *err = "option (sluice.method) is not a sluice.MethodOptions message";
      return -1;
    }
    size_t skip = payload_offset(f->data, f->len);
    if (skip == 0) {
      *err = "option (sluice.method) has a bad length prefix";
      return -1;
    }
    total += f->len - skip;
    count++;
  }
  if (count == 0)
    return 0;

  uint8_t *buf = malloc(total ? total : 1);
  if (buf == NULL) {
    *err = "out of memory";
    return -1;
  }
  size_t off = 0;
  for (unsigned i = 0; i < opts->base.n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *f = &opts->base.unknown_fields[i];
    if (f->tag == SLUICE_METHOD_OPTIONS_FIELD) {
      size_t skip = payload_offset(f->data, f->len);
      memcpy(buf + off, f->data + skip, f->len - skip);
      off += f->len - skip;
    }
  }
  Sluice__MethodOptions *m = sluice__method_options__unpack(NULL, total, buf);
  free(buf);
  if (m == NULL) {
    *err = "option (sluice.method) cannot be parsed as sluice.MethodOptions";
    return -1;
  }
  if (m->has_default_timeout_ms)
    out->default_timeout_ms = m->default_timeout_ms;
  if (m->has_max_request_size)
    out->max_request_size = m->max_request_size;
  if (m->has_max_response_size)
    out->max_response_size = m->max_response_size;
  sluice__method_options__free_unpacked(m, NULL);
  return 0;
}
