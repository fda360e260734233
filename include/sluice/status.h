/* sluice: status codes of calls and error codes of the API.
 *
 * Two error spaces, never mixed (as gRPC core does):
 *  - sluice_status_code: the outcome of an RPC, gRPC's 17 codes with gRPC's
 *    numbers. Every call completes with exactly one.
 *  - SLUICE_ERR_*: misuse of the API (NULL argument, bad target ...). API
 *    functions return 0 or a negative SLUICE_ERR_* value.
 */
#ifndef SLUICE_STATUS_H
#define SLUICE_STATUS_H

#include "sluice/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X-macro: name, number. One table gives the enum and the names. */
#define SLUICE_STATUS_MAP(XX)                                                  \
  XX(OK, 0)                                                                    \
  XX(CANCELLED, 1)                                                             \
  XX(UNKNOWN, 2)                                                               \
  XX(INVALID_ARGUMENT, 3)                                                      \
  XX(DEADLINE_EXCEEDED, 4)                                                     \
  XX(NOT_FOUND, 5)                                                             \
  XX(ALREADY_EXISTS, 6)                                                        \
  XX(PERMISSION_DENIED, 7)                                                     \
  XX(RESOURCE_EXHAUSTED, 8)                                                    \
  XX(FAILED_PRECONDITION, 9)                                                   \
  XX(ABORTED, 10)                                                              \
  XX(OUT_OF_RANGE, 11)                                                         \
  XX(UNIMPLEMENTED, 12)                                                        \
  XX(INTERNAL, 13)                                                             \
  XX(UNAVAILABLE, 14)                                                          \
  XX(DATA_LOSS, 15)                                                            \
  XX(UNAUTHENTICATED, 16)

typedef enum sluice_status_code {
#define SLUICE_XX(name, num) SLUICE_STATUS_##name = num,
  SLUICE_STATUS_MAP(SLUICE_XX)
#undef SLUICE_XX
} sluice_status_code;

/* The canonical name of a code ("DEADLINE_EXCEEDED"); "UNKNOWN_CODE" for a
 * number outside 0..16. Static string, never NULL. */
SLUICE_API const char *sluice_status_name(sluice_status_code code);

/* API misuse errors, returned as negative ints. */
#define SLUICE_ERRNO_MAP(XX)                                                   \
  XX(INVALID_ARG, -1, "invalid argument (NULL where a pointer is required?)")  \
  XX(NOMEM, -2, "out of memory")                                               \
  XX(BAD_TARGET, -3, "target string cannot be parsed")                         \
  XX(BAD_ADDRESS, -4, "address cannot be parsed or bound")                     \
  XX(STATE, -5, "object is in the wrong state for this operation")             \
  XX(ON_LOOP_THREAD, -6, "blocking call made on the loop thread")              \
  XX(SYSTEM, -7, "operating system call failed")                               \
  XX(DUPLICATE, -8, "already registered")                                      \
  XX(FULL, -9, "send queue full; wait for the send-ready callback")            \
  XX(TOO_LARGE, -10, "message larger than the allowed maximum")                \
  XX(TLS, -11,                                                                 \
     "TLS credentials cannot be loaded (see the options' last error)")         \
  XX(BAD_METADATA, -12,                                                        \
     "metadata refused: keys are lowercase [0-9a-z_.-], do not start with "    \
     "\"grpc-\"; values of keys not ending in \"-bin\" are printable ASCII")

enum {
  SLUICE_OK = 0,
#define SLUICE_XX(name, num, text) SLUICE_ERR_##name = num,
  SLUICE_ERRNO_MAP(SLUICE_XX)
#undef SLUICE_XX
};

/* A human-readable description of a SLUICE_ERR_* value (or "success" for 0).
 * Static string, never NULL. */
SLUICE_API const char *sluice_strerror(int err);

struct sluice_metadata;

/* The outcome of a call.
 *
 * Ownership: a status handed to a callback is borrowed and valid only until
 * the callback returns. A status filled by a blocking call belongs to the
 * caller, who releases it with sluice_status_clear().
 *
 * message is never NULL once a call has completed ("" when the peer sent
 * none). initial_md / trailing_md hold the custom metadata of the response
 * headers and trailers; NULL when there was none. */
typedef struct sluice_status {
  sluice_status_code code;
  char *message;
  struct sluice_metadata *initial_md;
  struct sluice_metadata *trailing_md;
} sluice_status;

/* Sets every field to zero/NULL. Call before handing a status to a blocking
 * call. NULL is ignored. */
SLUICE_API void sluice_status_init(sluice_status *st);

/* Frees what a status owns and re-initialises it. NULL is ignored. */
SLUICE_API void sluice_status_clear(sluice_status *st);

#ifdef __cplusplus
}
#endif
#endif
