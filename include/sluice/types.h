/** @file
 * sluice: enums, constants and types shared by the client and the server
 * API (compression, send flags, buffer and window sizes, the generic
 * function pointer of generated stubs). Included by sluice/channel.h,
 * sluice/call.h and sluice/server.h; it declares no function, so the
 * library's lower layers may use it without pulling in the channel or
 * server API.
 */
#ifndef SLUICE_TYPES_H
#define SLUICE_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/** Message compression (grpc-encoding). Both sides always accept identity
 * and gzip; these choose what a sender uses. */
typedef enum sluice_compression {
  SLUICE_COMPRESS_NONE = 0, /**< identity: messages go uncompressed */
  SLUICE_COMPRESS_GZIP = 1  /**< gzip */
} sluice_compression;

/** Flag of sluice_call_send_ex() and sluice_server_call_send_ex(): send
 * this message uncompressed, even when the call compresses. */
#define SLUICE_SEND_NO_COMPRESS 1u

/** Default bound of a call's send queue, in bytes (call option
 * sluice_call_opts::send_buffer; server option
 * sluice_server_opts_set_send_buffer()): 256 KiB. */
#define SLUICE_DEFAULT_SEND_BUFFER (256u * 1024u)
/** HTTP/2 receive window per stream announced by sluice (both sides), 1 MiB:
 * the most a paused receiver holds beyond one partial message. */
#define SLUICE_STREAM_WINDOW (1u << 20)

/** For generated typed stubs: a generic function pointer that stands for a
 * typed callback (unary completion, typed streaming handlers) on its way
 * through the runtime. The stub's trampoline (sluice_unary_tramp, or the
 * trampolines given to sluice_call_start_typed() and
 * sluice_server_call_set_handlers_typed()) casts it back to its type and
 * calls it, so no function is ever called through a pointer of the wrong
 * type. */
typedef void (*sluice_generic_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
