/** @file
 * sluice: method and service tables.
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

struct sluice_method_config;

/** The kind of an RPC method: which sides stream. */
typedef enum sluice_call_kind {
  SLUICE_CALL_UNARY = 0,            /**< one request, one response */
  SLUICE_CALL_CLIENT_STREAMING = 1, /**< requests stream, one response */
  SLUICE_CALL_SERVER_STREAMING = 2, /**< one request, responses stream */
  SLUICE_CALL_BIDI_STREAMING = 3    /**< both stream */
} sluice_call_kind;

/** Whether the client of a method of kind k sends a stream of requests
 * (client-streaming and bidi methods) rather than exactly one.
 * @param k the method's kind
 * @return 1 for SLUICE_CALL_CLIENT_STREAMING and SLUICE_CALL_BIDI_STREAMING,
 *   else 0 */
static inline int sluice_call_kind_streams_requests(sluice_call_kind k) {
  return k == SLUICE_CALL_CLIENT_STREAMING || k == SLUICE_CALL_BIDI_STREAMING;
}

/** Whether the server of a method of kind k sends a stream of responses
 * (server-streaming and bidi methods) rather than exactly one.
 * @param k the method's kind
 * @return 1 for SLUICE_CALL_SERVER_STREAMING and SLUICE_CALL_BIDI_STREAMING,
 *   else 0 */
static inline int sluice_call_kind_streams_responses(sluice_call_kind k) {
  return k == SLUICE_CALL_SERVER_STREAMING || k == SLUICE_CALL_BIDI_STREAMING;
}

/** One RPC method. Defaults come from (sluice.method) options in the
 * .proto; 0 (NULL for config) means "not set": the channel's or server's
 * own default applies.
 * A per-call option overrides them: a call's timeout replaces the method's;
 * size limits combine, the smallest one set (channel or server, method,
 * call) applies, so a method can lower its side's limit, never raise it. */
typedef struct sluice_method_desc {
  const char *path; /**< "/package.Service/Method", as sent in :path */
  const char *name; /**< "Method" */
  /** protobuf-c descriptor of the request message type. */
  const ProtobufCMessageDescriptor *request;
  /** protobuf-c descriptor of the response message type. */
  const ProtobufCMessageDescriptor *response;
  sluice_call_kind kind; /**< which sides stream */
  /** Timeout of a call that sets none, in ms (option default_timeout_ms);
   * 0: none. */
  uint64_t default_timeout_ms;
  /** Largest request message, in bytes (option max_request_size); 0: only
   * the channel's or server's limit. */
  uint32_t max_request_size;
  /** Largest response message, in bytes (option max_response_size); 0:
   * only the channel's or server's limit. */
  uint32_t max_response_size;
  /** The method's retry or hedging policy from its (sluice.method)
   * options (retry_policy, hedging_policy; sluice/resilience.h), with
   * default_timeout_ms and the two sizes above repeated in it; NULL when
   * the .proto declares none. Static and const, as the desc. Precedence,
   * highest first: the call's own options (sluice_call_opts), the
   * channel's service config (sluice_channel_opts_set_service_config(),
   * sluice_channel_opts_set_method_config()), this, the library's
   * defaults: this applies when the service config has no entry for the
   * method. A desc built by hand may leave it NULL. */
  const struct sluice_method_config *config;
} sluice_method_desc;

/** One service: its full name ("package.Service") and its methods. */
typedef struct sluice_service_desc {
  const char *full_name; /**< "package.Service" */
  size_t n_methods;      /**< number of entries in methods */
  /** The methods in .proto order (NULL when n_methods is 0). */
  const sluice_method_desc *methods;
} sluice_service_desc;

#ifdef __cplusplus
}
#endif
#endif
