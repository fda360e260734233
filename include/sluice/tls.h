/* sluice: TLS (OpenSSL) for channels and servers, including mutual TLS.
 *
 * TLS 1.2 is the minimum; ALPN "h2" is required both ways (a peer that does
 * not agree on h2 is refused); the client sends SNI and verifies the
 * server's certificate chain and host name. All TLS work runs on the
 * connection's loop through memory BIOs: nothing blocks, and many
 * handshakes interleave.
 *
 * Credentials are loaded when set (errors are reported then, with a text in
 * sluice_channel_opts_last_error / sluice_server_opts_last_error), and the
 * configuration is copied: the caller's strings and buffers may be freed
 * after the call.
 */
#ifndef SLUICE_TLS_H
#define SLUICE_TLS_H

#include "sluice/export.h"

#include <stddef.h>

#include "sluice/channel.h"
#include "sluice/server.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PEM input: a file path, or data/len in memory (file NULL). Both empty
 * means "not given". */
typedef struct sluice_pem {
  const char *file;
  const void *data;
  size_t len;
} sluice_pem;

/* Client side. */
typedef struct sluice_tls_client_config {
  /* Trusted CA certificates; not given = the system's roots. */
  sluice_pem ca;
  /* Client certificate chain and private key, for mutual TLS (optional;
   * both or neither). */
  sluice_pem cert;
  sluice_pem key;
  /* Name to send as SNI and to verify the certificate against, instead of
   * the target's host (tests, or addressing a server by IP). NULL = the
   * target's host (an IP literal is then checked against IP SANs). */
  const char *server_name_override;
} sluice_tls_client_config;

/* Fills c with "not given" everywhere. */
SLUICE_API void sluice_tls_client_config_init(sluice_tls_client_config *c);

/* Makes channels created with o use TLS with cfg. Returns 0,
 * SLUICE_ERR_INVALID_ARG (o or cfg NULL, cert without key ...) or
 * SLUICE_ERR_TLS (a file cannot be read, a PEM does not parse, the key does
 * not match the certificate: see sluice_channel_opts_last_error). */
SLUICE_API int sluice_channel_opts_set_tls(sluice_channel_opts *o,
                                           const sluice_tls_client_config *cfg);

/* The text of the last SLUICE_ERR_TLS from these options ("" if none).
 * Borrowed; valid until the options change or are freed. */
SLUICE_API const char *
sluice_channel_opts_last_error(const sluice_channel_opts *o);

/* Whether a TLS server asks clients for a certificate. */
typedef enum sluice_client_cert_mode {
  SLUICE_CLIENT_CERT_NONE = 0,    /* do not ask */
  SLUICE_CLIENT_CERT_REQUEST = 1, /* ask; verify one if sent */
  SLUICE_CLIENT_CERT_REQUIRE = 2  /* ask; refuse a client without one */
} sluice_client_cert_mode;

/* Server side. */
typedef struct sluice_tls_server_config {
  sluice_pem cert; /* certificate chain (required) */
  sluice_pem key;  /* private key (required) */
  /* CAs that client certificates must chain to (required for REQUEST and
   * REQUIRE). */
  sluice_pem client_ca;
  sluice_client_cert_mode client_cert;
} sluice_tls_server_config;

/* Fills c with "not given" everywhere and SLUICE_CLIENT_CERT_NONE. */
SLUICE_API void sluice_tls_server_config_init(sluice_tls_server_config *c);

/* Makes servers created with o accept TLS only, on every listener. Returns
 * 0, SLUICE_ERR_INVALID_ARG or SLUICE_ERR_TLS (see
 * sluice_server_opts_last_error). */
SLUICE_API int sluice_server_opts_set_tls(sluice_server_opts *o,
                                          const sluice_tls_server_config *cfg);

/* The text of the last SLUICE_ERR_TLS from these options ("" if none). */
SLUICE_API const char *
sluice_server_opts_last_error(const sluice_server_opts *o);

/* The verified client certificate's subject of a mutual-TLS call
 * ("CN=client,O=..." in RFC 2253 form), or NULL (plaintext, or no client
 * certificate). Borrowed; valid until the call is finished. */
SLUICE_API const char *
sluice_server_call_peer_identity(const sluice_server_call *call);

#ifdef __cplusplus
}
#endif
#endif
