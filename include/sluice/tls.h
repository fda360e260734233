/** @file
 * sluice: TLS (OpenSSL) for channels and servers, including mutual TLS.
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

/* Only the option handles are needed here, so that this header does not
 * pull in the channel and server APIs (C11 allows repeating a typedef). */
/** Channel options (sluice/channel.h). */
typedef struct sluice_channel_opts sluice_channel_opts;
/** Server options (sluice/server.h). */
typedef struct sluice_server_opts sluice_server_opts;

#ifdef __cplusplus
extern "C" {
#endif

/** PEM input: a file path, or data/len in memory (file NULL). Both empty
 * means "not given". A file wins when both are given. */
typedef struct sluice_pem {
  const char *file; /**< path of a PEM file; NULL or "": none */
  const void *data; /**< PEM text in memory (used when file is not given) */
  size_t len;       /**< bytes of data; 0: none */
} sluice_pem;

/** Client side: what a channel trusts and presents. */
typedef struct sluice_tls_client_config {
  /** Trusted CA certificates; not given = the system's roots. */
  sluice_pem ca;
  /** Client certificate chain, for mutual TLS (optional; both cert and key
   * or neither). */
  sluice_pem cert;
  /** The client certificate's private key (with cert). */
  sluice_pem key;
  /** Name to send as SNI and to verify the certificate against, instead of
   * the target's host (tests, or addressing a server by IP). NULL = the
   * target's host (an IP literal is then checked against IP SANs). */
  const char *server_name_override;
} sluice_tls_client_config;

/** Fills c with "not given" everywhere.
 * @param c the configuration; NULL is ignored */
SLUICE_API void sluice_tls_client_config_init(sluice_tls_client_config *c);

/** Makes channels created with o use TLS with cfg. The credentials are
 * loaded now and cfg is copied (its strings and buffers may be freed
 * after). On failure the options keep their previous TLS setting and
 * sluice_channel_opts_last_error() says why.
 * @param o the options
 * @param cfg the configuration
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o or cfg is NULL, or cert without key (or
 *   key without cert)
 * @retval SLUICE_ERR_TLS a file cannot be read, a PEM does not parse, the
 *   key does not match the certificate, the system's CAs cannot be loaded
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_channel_opts_set_tls(sluice_channel_opts *o,
                                           const sluice_tls_client_config *cfg);

/** Whether a TLS server asks clients for a certificate. */
typedef enum sluice_client_cert_mode {
  SLUICE_CLIENT_CERT_NONE = 0,    /**< do not ask */
  SLUICE_CLIENT_CERT_REQUEST = 1, /**< ask; verify one if sent */
  SLUICE_CLIENT_CERT_REQUIRE = 2  /**< ask; refuse a client without one */
} sluice_client_cert_mode;

/** Server side: what a server presents and whom it trusts. */
typedef struct sluice_tls_server_config {
  sluice_pem cert; /**< certificate chain (required) */
  sluice_pem key;  /**< private key (required) */
  /** CAs that client certificates must chain to (required for REQUEST and
   * REQUIRE; ignored for NONE). */
  sluice_pem client_ca;
  sluice_client_cert_mode client_cert; /**< whether to ask for one */
} sluice_tls_server_config;

/** Fills c with "not given" everywhere and SLUICE_CLIENT_CERT_NONE.
 * @param c the configuration; NULL is ignored */
SLUICE_API void sluice_tls_server_config_init(sluice_tls_server_config *c);

/** Makes servers created with o accept TLS only, on every listener. The
 * credentials are loaded now and cfg is copied. On failure the options keep
 * their previous TLS setting and sluice_server_opts_last_error() says why.
 * @param o the options
 * @param cfg the configuration
 * @retval 0 set
 * @retval SLUICE_ERR_INVALID_ARG o or cfg is NULL, cert or key is not
 *   given, or client_cert is REQUEST or REQUIRE without client_ca
 * @retval SLUICE_ERR_TLS a file cannot be read, a PEM does not parse, the
 *   key does not match the certificate, no certificate in client_ca
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_server_opts_set_tls(sluice_server_opts *o,
                                          const sluice_tls_server_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
