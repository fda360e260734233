/* sluice: method and service tables.
 *
 * protoc-gen-sluice emits one sluice_service_desc per service with one
 * sluice_method_desc per method; the runtime reads them on both sides. They
 * are static, const and live for the whole program.
 */
#ifndef SLUICE_METHOD_H
#define SLUICE_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sluice_call_kind {
  SLUICE_CALL_UNARY = 0,
  SLUICE_CALL_CLIENT_STREAMING = 1,
  SLUICE_CALL_SERVER_STREAMING = 2,
  SLUICE_CALL_BIDI_STREAMING = 3
} sluice_call_kind;

/* One RPC method. Defaults come from (sluice.method) options in the .proto;
 * 0 means "not set": the channel's or server's own default applies. A per-call
 * option overrides them. */
typedef struct sluice_method_desc {
  const char *path; /* "/package.Service/Method", as sent in :path */
  const char *name; /* "Method" */
  const ProtobufCMessageDescriptor *request;
  const ProtobufCMessageDescriptor *response;
  sluice_call_kind kind;
  uint64_t default_timeout_ms;
  uint32_t max_request_size;
  uint32_t max_response_size;
} sluice_method_desc;

/* One service: its full name ("package.Service") and its methods. */
typedef struct sluice_service_desc {
  const char *full_name;
  size_t n_methods;
  const sluice_method_desc *methods;
} sluice_service_desc;

#ifdef __cplusplus
}
#endif
#endif
