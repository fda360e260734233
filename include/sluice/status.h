/** @file
 * sluice: status codes of calls and error codes of the API.
 *
 * Two error spaces, never mixed (as gRPC core does):
 *  - sluice_status_code: the outcome of an RPC, gRPC's 17 codes with gRPC's
 *    numbers. Every call completes with exactly one.
 *  - `SLUICE_ERR_*`: misuse of the API (NULL argument, bad target ...). API
 *    functions return 0 or a negative `SLUICE_ERR_*` value.
 */
#ifndef SLUICE_STATUS_H
#define SLUICE_STATUS_H

#include "sluice/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** X-macro table of the status codes, `XX(name, number)` per code: gRPC's
 * names and numbers. One table gives the enum (SLUICE_STATUS_<name>) and
 * the names (sluice_status_name()). */
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

/** The outcome of an RPC: one of gRPC's 17 status codes, with gRPC's
 * numbers (SLUICE_STATUS_MAP). Every call completes with exactly one. */
typedef enum sluice_status_code {
#define SLUICE_XX(name, num) SLUICE_STATUS_##name = num,
  SLUICE_STATUS_MAP(SLUICE_XX)
#undef SLUICE_XX
} sluice_status_code;

/** @var SLUICE_STATUS_OK
 * Not an error: the call succeeded. */
/** @var SLUICE_STATUS_CANCELLED
 * The call was cancelled, usually by the caller. */
/** @var SLUICE_STATUS_UNKNOWN
 * An error without a better code (a code outside gRPC's, ...). */
/** @var SLUICE_STATUS_INVALID_ARGUMENT
 * The client sent an invalid argument, whatever the server's state. */
/** @var SLUICE_STATUS_DEADLINE_EXCEEDED
 * The deadline passed before the call completed. */
/** @var SLUICE_STATUS_NOT_FOUND
 * Something the call asked for was not found. */
/** @var SLUICE_STATUS_ALREADY_EXISTS
 * Something the call tried to create already exists. */
/** @var SLUICE_STATUS_PERMISSION_DENIED
 * The caller is not allowed to do this. */
/** @var SLUICE_STATUS_RESOURCE_EXHAUSTED
 * A resource ran out: a message size limit, a concurrency limit or queue
 * (sluice: dropped locally, or refused or shed by the server). */
/** @var SLUICE_STATUS_FAILED_PRECONDITION
 * The system is not in the state the operation needs (sluice: a blocking
 * call on the channel's loop thread). */
/** @var SLUICE_STATUS_ABORTED
 * Aborted, typically by a concurrency conflict. */
/** @var SLUICE_STATUS_OUT_OF_RANGE
 * An argument past the valid range. */
/** @var SLUICE_STATUS_UNIMPLEMENTED
 * The method is not implemented, or not known to the server. */
/** @var SLUICE_STATUS_INTERNAL
 * An internal error (sluice: a message that cannot be parsed, ...). */
/** @var SLUICE_STATUS_UNAVAILABLE
 * The service cannot be reached now (no connection, connection lost),
 * usually transient: a retry may succeed. */
/** @var SLUICE_STATUS_DATA_LOSS
 * Unrecoverable data loss or corruption. */
/** @var SLUICE_STATUS_UNAUTHENTICATED
 * The call lacks valid authentication credentials. */

/** The canonical name of a code ("DEADLINE_EXCEEDED"). Thread-safe.
 * @param code the code
 * @return a static string, never NULL; "UNKNOWN_CODE" for a number outside
 *   0..16 */
SLUICE_API const char *sluice_status_name(sluice_status_code code);

/** X-macro table of the API's error codes (misuse of the API, returned as
 * negative ints), `XX(name, number, text)` per code: SLUICE_ERR_<name> =
 * number, and text is what sluice_strerror() returns for it. */
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

/** The API's error codes: SLUICE_OK (0) and one negative SLUICE_ERR_<name>
 * per entry of SLUICE_ERRNO_MAP, whose definition lists them with their
 * meaning (the reference shows only SLUICE_OK as a value here: Doxygen
 * cannot expand the table a second time). API functions return 0 or one of
 * these. */
enum {
  SLUICE_OK = 0, /**< success */
#define SLUICE_XX(name, num, text) SLUICE_ERR_##name = num,
  SLUICE_ERRNO_MAP(SLUICE_XX)
#undef SLUICE_XX
};

/** A human-readable description of a `SLUICE_ERR_*` value (or "success"
 * for 0). Thread-safe.
 * @param err 0 or a `SLUICE_ERR_*` value
 * @return a static string, never NULL; "unknown error" for any other
 *   value */
SLUICE_API const char *sluice_strerror(int err);

struct sluice_metadata;

/** The outcome of a call.
 *
 * Ownership: a status handed to a callback is borrowed and valid only until
 * the callback returns. A status filled by a blocking call belongs to the
 * caller, who releases it with sluice_status_clear().
 *
 * message is never NULL once a call has completed ("" when the peer sent
 * none). initial_md / trailing_md hold the custom metadata of the response
 * headers and trailers; NULL when there was none. */
typedef struct sluice_status {
  sluice_status_code code; /**< the status code */
  /** The status message (the peer's grpc-message, or the library's text);
   * NUL-terminated. */
  char *message;
  /** Custom metadata of the response headers; NULL when there was none. */
  struct sluice_metadata *initial_md;
  /** Custom metadata of the trailers; NULL when there was none. */
  struct sluice_metadata *trailing_md;
} sluice_status;

/** Sets every field to zero/NULL (code OK). Call before handing a status
 * to a blocking call.
 * @param st the status; NULL is ignored */
SLUICE_API void sluice_status_init(sluice_status *st);

/** Frees what a status owns (message and metadata) and re-initialises it.
 * Only for a status the caller owns, never one borrowed in a callback.
 * @param st the status; NULL is ignored */
SLUICE_API void sluice_status_clear(sluice_status *st);

#ifdef __cplusplus
}
#endif
#endif
