/* protoc-gen-sluice: (sluice.method) options, decoded with protoc-c's code
 * for options.proto so the plugin and users read the same schema. */
#include "options.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "printer.h"
#include "sluice/options.pb-c.h"
#include "sluice/status.h"

#define OPT "option (sluice.method)."

const char *options_code_name(unsigned c) {
  switch (c) {
#define SLUICE_XX(name, num)                                                   \
  case num:                                                                    \
    return #name;
    SLUICE_STATUS_MAP(SLUICE_XX)
#undef SLUICE_XX
  }
  return NULL;
}

/* The code named name, as gRPC spells it ("UNAVAILABLE"), or -1. */
static int code_by_name(const char *name) {
  for (unsigned c = 0; options_code_name(c) != NULL; c++)
    if (strcmp(options_code_name(c), name) == 0)
      return (int)c;
  return -1;
}

/* ORs SLUICE_CODE_BIT() of each of the n names into *bits. Returns 0, or
 * -1 with *err naming field when a name is unknown or OK. */
static int code_set(char *const *names, size_t n, const char *field,
                    uint32_t *bits, char **err) {
  for (size_t i = 0; i < n; i++) {
    int c = code_by_name(names[i]);
    if (c < 0) {
      *err = str_printf(OPT "%s: unknown status code \"%s\" (gRPC's names, "
                            "upper case: \"UNAVAILABLE\", "
                            "\"RESOURCE_EXHAUSTED\", ...)",
                        field, names[i]);
      return -1;
    }
    if (c == SLUICE_STATUS_OK) {
      *err = str_printf(OPT "%s: \"OK\" is not a failure and cannot be "
                            "listed",
                        field);
      return -1;
    }
    *bits |= SLUICE_CODE_BIT(c);
  }
  return 0;
}

static int read_retry(const Sluice__MethodOptions__RetryPolicy *r,
                      sluice_retry_policy *out, char **err) {
  out->max_attempts = r->has_max_attempts ? r->max_attempts : 0;
  out->initial_backoff_ms =
      r->has_initial_backoff_ms ? r->initial_backoff_ms : 0;
  out->max_backoff_ms = r->has_max_backoff_ms ? r->max_backoff_ms : 0;
  out->backoff_multiplier =
      r->has_backoff_multiplier ? r->backoff_multiplier : 0.0;
  out->retryable_codes = 0;
  if (out->max_attempts < 2) {
    *err = str_printf(OPT "retry_policy.max_attempts must be at least 2 "
                          "(%s %lu)",
                      r->has_max_attempts ? "got" : "not set:",
                      (unsigned long)out->max_attempts);
    return -1;
  }
  if (out->initial_backoff_ms == 0) {
    *err = str_printf(OPT "retry_policy.initial_backoff_ms must be > 0 (%s)",
                      r->has_initial_backoff_ms ? "got 0" : "not set");
    return -1;
  }
  if (out->max_backoff_ms == 0) {
    *err = str_printf(OPT "retry_policy.max_backoff_ms must be > 0 (%s)",
                      r->has_max_backoff_ms ? "got 0" : "not set");
    return -1;
  }
  /* Written so that NaN fails too; infinity is refused as well. */
  double m = out->backoff_multiplier;
  if (!(m > 0.0 && m <= DBL_MAX)) {
    if (r->has_backoff_multiplier)
      *err = str_printf(OPT "retry_policy.backoff_multiplier must be a "
                            "finite number > 0 (got %g)",
                        m);
    else
      *err = str_printf(OPT "retry_policy.backoff_multiplier must be a "
                            "finite number > 0 (not set)");
    return -1;
  }
  if (r->n_retryable_status_codes == 0) {
    *err = str_printf(OPT "retry_policy.retryable_status_codes must name at "
                          "least one status code (\"UNAVAILABLE\", ...)");
    return -1;
  }
  return code_set(r->retryable_status_codes, r->n_retryable_status_codes,
                  "retry_policy.retryable_status_codes", &out->retryable_codes,
                  err);
}

static int read_hedging(const Sluice__MethodOptions__HedgingPolicy *h,
                        sluice_hedging_policy *out, char **err) {
  out->max_attempts = h->has_max_attempts ? h->max_attempts : 0;
  out->hedging_delay_ms = h->has_hedging_delay_ms ? h->hedging_delay_ms : 0;
  out->non_fatal_codes = 0;
  if (out->max_attempts < 2) {
    *err = str_printf(OPT "hedging_policy.max_attempts must be at least 2 "
                          "(%s %lu)",
                      h->has_max_attempts ? "got" : "not set:",
                      (unsigned long)out->max_attempts);
    return -1;
  }
  return code_set(h->non_fatal_status_codes, h->n_non_fatal_status_codes,
                  "hedging_policy.non_fatal_status_codes",
                  &out->non_fatal_codes, err);
}

/* The policies of m into out->config; out's three plain values are set. */
static int read_policies(const Sluice__MethodOptions *m, method_defaults *out,
                         char **err) {
  if (m->retry_policy == NULL && m->hedging_policy == NULL)
    return 0;
  if (m->retry_policy != NULL && m->hedging_policy != NULL) {
    *err = str_printf(OPT "retry_policy and " OPT "hedging_policy are both "
                          "set; a method has at most one of them");
    return -1;
  }
  sluice_method_config *mc = &out->config;
  memset(mc, 0, sizeof *mc);
  mc->timeout_ms = out->default_timeout_ms;
  mc->wait_for_ready = -1;
  mc->max_request_bytes = out->max_request_size;
  mc->max_response_bytes = out->max_response_size;
  if (m->retry_policy != NULL) {
    mc->has_retry = 1;
    if (read_retry(m->retry_policy, &mc->retry, err) != 0)
      return -1;
  } else {
    mc->has_hedging = 1;
    if (read_hedging(m->hedging_policy, &mc->hedging, err) != 0)
      return -1;
  }
  out->has_config = 1;
  return 0;
}

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
                        method_defaults *out, char **err) {
  memset(out, 0, sizeof *out);
  *err = NULL;
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
      *err = str_printf(
          "option (sluice.method) is not a sluice.MethodOptions message");
      return -1;
    }
    size_t skip = payload_offset(f->data, f->len);
    if (skip == 0) {
      *err = str_printf("option (sluice.method) has a bad length prefix");
      return -1;
    }
    total += f->len - skip;
    count++;
  }
  if (count == 0)
    return 0;

  uint8_t *buf = malloc(total ? total : 1);
  if (buf == NULL) {
    *err = str_printf("out of memory");
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
    *err = str_printf(
        "option (sluice.method) cannot be parsed as sluice.MethodOptions");
    return -1;
  }
  if (m->has_default_timeout_ms)
    out->default_timeout_ms = m->default_timeout_ms;
  if (m->has_max_request_size)
    out->max_request_size = m->max_request_size;
  if (m->has_max_response_size)
    out->max_response_size = m->max_response_size;
  int rc = read_policies(m, out, err);
  sluice__method_options__free_unpacked(m, NULL);
  return rc;
}
