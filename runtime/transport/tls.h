/* TLS for one connection, with OpenSSL driven through memory BIOs: the
 * connection feeds received ciphertext in and writes out what the engine
 * produces, so TLS never touches the socket and never blocks the loop.
 *
 * Contexts (SSL_CTX) are built once from the user's configuration (client
 * or server side) and shared, reference-counted, by every connection. They
 * enforce TLS >= 1.2, ALPN "h2", peer verification and no renegotiation.
 */
#ifndef SLUICE_TRANSPORT_TLS_H
#define SLUICE_TRANSPORT_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sluice/status.h"
#include "sluice/tls.h"

typedef struct ssl_ctx_st sluice__tls_ctx; /* an OpenSSL SSL_CTX */

/* Builds a client context from cfg. Returns 0, SLUICE_ERR_INVALID_ARG or
 * SLUICE_ERR_TLS with a description in err (errlen bytes). */
int sluice__tls_ctx_client(sluice__tls_ctx **out,
                           const sluice_tls_client_config *cfg, char *err,
                           size_t errlen);
/* Builds a server context from cfg; as above. */
int sluice__tls_ctx_server(sluice__tls_ctx **out,
                           const sluice_tls_server_config *cfg, char *err,
                           size_t errlen);
/* Takes / drops a reference (NULL is ignored). */
void sluice__tls_ctx_ref(sluice__tls_ctx *ctx);
void sluice__tls_ctx_unref(sluice__tls_ctx *ctx);

typedef struct sluice__tls sluice__tls;

/* Creates the TLS state of one connection. Client side: name is sent as SNI
 * (unless it is an IP literal) and the server certificate is verified
 * against it (DNS name or IP address). Server side: name is NULL. Returns
 * NULL when out of memory. */
sluice__tls *sluice__tls_new(sluice__tls_ctx *ctx, int is_client,
                             const char *name);
void sluice__tls_del(sluice__tls *t);

/* Outcome of feeding or driving the engine. */
typedef enum {
  SLUICE__TLS_AGAIN = 0,       /* needs more input (or nothing to do) */
  SLUICE__TLS_ESTABLISHED = 1, /* the handshake completed just now */
  SLUICE__TLS_ERROR = -1       /* fatal: sluice__tls_error() says why */
} sluice__tls_state;

/* Starts the handshake (the client's hello goes to the output). */
sluice__tls_state sluice__tls_start(sluice__tls *t);

/* Feeds len received bytes. Before the handshake completes this drives it
 * (ESTABLISHED once it does, after the ALPN and verification checks); once
 * established, decrypted application data becomes readable. */
sluice__tls_state sluice__tls_feed(sluice__tls *t, const uint8_t *data,
                                   size_t len);

/* Non-zero once the handshake has completed. */
int sluice__tls_established(const sluice__tls *t);

/* Reads decrypted bytes: > 0 bytes, 0 none for now, -1 closed or failed
 * (sluice__tls_error() says why; "" for a clean close_notify). */
ssize_t sluice__tls_read(sluice__tls *t, uint8_t *buf, size_t cap);

/* Encrypts len bytes (established only). Returns 0 or -1. */
int sluice__tls_write(sluice__tls *t, const uint8_t *data, size_t len);

/* Bytes of ciphertext waiting to be sent. */
size_t sluice__tls_pending(const sluice__tls *t);
/* Moves up to cap bytes of ciphertext to buf; returns the count. */
size_t sluice__tls_take(sluice__tls *t, uint8_t *buf, size_t cap);

/* Queues a close_notify alert (graceful close; once; only after the
 * handshake): the caller sends what sluice__tls_take then returns before
 * closing the socket, so the peer can tell the end from a truncation. */
void sluice__tls_close_notify(sluice__tls *t);

/* Why the connection failed, for a status message ("" if it did not). */
const char *sluice__tls_error(const sluice__tls *t);

/* The verified peer certificate's subject (RFC 2253), malloc'd, or NULL. */
char *sluice__tls_peer_subject(const sluice__tls *t);

#endif
