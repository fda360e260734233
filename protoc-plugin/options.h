/* protoc-gen-sluice: reading (sluice.method) options.
 *
 * protoc hands plugins MethodOptions with custom options still serialized:
 * protobuf-c keeps extension 51001 as an unknown field whose bytes are a
 * sluice.MethodOptions message (proto/sluice/options.proto).
 */
#ifndef SLUICE_PLUGIN_OPTIONS_H
#define SLUICE_PLUGIN_OPTIONS_H

#include <stdint.h>

#include "google/protobuf/descriptor.pb-c.h"
#include "sluice/resilience.h"

/* The field number of the (sluice.method) extension of MethodOptions. */
#define SLUICE_METHOD_OPTIONS_FIELD 51001u

/* Per-method defaults that end up in sluice_method_desc; 0 = not set. */
typedef struct method_defaults {
  uint64_t default_timeout_ms;
  uint32_t max_request_size;
  uint32_t max_response_size;
  /* Non-zero when the options declare a retry or a hedging policy: the
   * method then gets a static sluice_method_config, config, which holds
   * the policy and repeats the three values above (wait_for_ready unset). */
  int has_config;
  sluice_method_config config;
} method_defaults;

/* Fills *out from opts (NULL: no options, all zero). Returns 0, or -1 with
 * *err set to a malloc()ed reason (NULL when out of memory) when the
 * extension is malformed, a policy is invalid (the reason names the field:
 * "option (sluice.method).retry_policy.max_attempts must be ...") or memory
 * ran out. */
int options_read_method(const Google__Protobuf__MethodOptions *opts,
                        method_defaults *out, char **err);

/* The name of status code c as gRPC spells it ("UNAVAILABLE"), or NULL
 * when c is not a code. */
const char *options_code_name(unsigned c);

#endif
