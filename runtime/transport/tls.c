#include "transport/tls.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct sluice__tls {
  SSL *ssl;
  BIO *in, *out; /* owned by ssl */
  int is_client;
  int established;
  char err[256];
};

/* ---- contexts */

static int given(const sluice_pem *p) {
  return (p->file && *p->file) || (p->data && p->len);
}

/* The first queued OpenSSL error as text, or fallback. */
static void openssl_reason(char *err, size_t errlen, const char *what,
                           const char *fallback) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  snprintf(err, errlen, "%s: %s", what, r ? r : fallback);
  ERR_clear_error();
}

static BIO *pem_bio(const sluice_pem *p) {
  if (p->file && *p->file)
    return BIO_new_file(p->file, "r");
  return BIO_new_mem_buf(p->data, (int)p->len);
}

static const char *pem_name(const sluice_pem *p) {
  return p->file && *p->file ? p->file : "(PEM in memory)";
}

/* Adds every certificate of p to the context's trust store; with ca_list
 * also to the list of CAs a server names when asking for client
 * certificates. */
static int load_cas(SSL_CTX *ctx, const sluice_pem *p, int ca_list, char *err,
                    size_t errlen) {
  BIO *b = pem_bio(p);
  if (!b) {
    char what[300];
    snprintf(what, sizeof what, "cannot read CA certificates %s", pem_name(p));
    openssl_reason(err, errlen, what, "no such file");
    return SLUICE_ERR_TLS;
  }
  X509_STORE *store = SSL_CTX_get_cert_store(ctx);
  int n = 0;
  X509 *x;
  while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
    X509_STORE_add_cert(store, x);
    if (ca_list)
      SSL_CTX_add_client_CA(ctx, x);
    X509_free(x);
    n++;
  }
  BIO_free(b);
  ERR_clear_error(); /* the loop ends on "no start line" */
  if (n == 0) {
    snprintf(err, errlen, "no PEM certificate found in %s", pem_name(p));
    return SLUICE_ERR_TLS;
  }
  return 0;
}

static int load_cert_and_key(SSL_CTX *ctx, const sluice_pem *cert,
                             const sluice_pem *key, char *err, size_t errlen) {
  char what[300];
  BIO *b = pem_bio(cert);
  X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
  if (!x) {
    snprintf(what, sizeof what, "cannot read certificate %s", pem_name(cert));
    openssl_reason(err, errlen, what, "no such file");
    BIO_free(b);
    return SLUICE_ERR_TLS;
  }
  int ok = SSL_CTX_use_certificate(ctx, x) == 1;
  X509_free(x);
  /* The rest of the file is the chain. */
  while (ok && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
    if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
      X509_free(x);
      ok = 0;
    }
  BIO_free(b);
  ERR_clear_error();
  if (!ok) {
    snprintf(err, errlen, "cannot use certificate %s", pem_name(cert));
    return SLUICE_ERR_TLS;
  }
  b = pem_bio(key);
  EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
  BIO_free(b);
  if (!k) {
    snprintf(what, sizeof what, "cannot read private key %s", pem_name(key));
    openssl_reason(err, errlen, what, "no such file");
    return SLUICE_ERR_TLS;
  }
  ok = SSL_CTX_use_PrivateKey(ctx, k) == 1 && SSL_CTX_check_private_key(ctx);
  EVP_PKEY_free(k);
  if (!ok) {
    snprintf(what, sizeof what, "private key %s does not match certificate %s",
             pem_name(key), pem_name(cert));
    openssl_reason(err, errlen, what, "mismatch");
    return SLUICE_ERR_TLS;
  }
  return 0;
}

static SSL_CTX *ctx_common(const SSL_METHOD *m) {
  SSL_CTX *ctx = SSL_CTX_new(m);
  if (!ctx)
    return NULL;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  /* Renegotiation has no place under HTTP/2 (RFC 7540 9.2.1). */
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  return ctx;
}

int sluice__tls_ctx_client(sluice__tls_ctx **out,
                           const sluice_tls_client_config *cfg, char *err,
                           size_t errlen) {
  if (!out || !cfg || given(&cfg->cert) != given(&cfg->key)) {
    snprintf(err, errlen, "a client certificate needs its key (and back)");
    return SLUICE_ERR_INVALID_ARG;
  }
  SSL_CTX *ctx = ctx_common(TLS_client_method());
  if (!ctx) {
    snprintf(err, errlen, "out of memory");
    return SLUICE_ERR_NOMEM;
  }
  static const unsigned char alpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn); /* 0 = success */
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  int rv = 0;
  if (given(&cfg->ca))
    rv = load_cas(ctx, &cfg->ca, 0, err, errlen);
  else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    openssl_reason(err, errlen, "cannot load the system's CA certificates",
                   "unknown");
    rv = SLUICE_ERR_TLS;
  }
  if (rv == 0 && given(&cfg->cert))
    rv = load_cert_and_key(ctx, &cfg->cert, &cfg->key, err, errlen);
  if (rv != 0) {
    SSL_CTX_free(ctx);
    return rv;
  }
  *out = ctx;
  return 0;
}

/* Server ALPN: h2 or nothing (a fatal no_application_protocol alert). */
static int select_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                     const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  for (unsigned int i = 0; i < inlen;) {
    unsigned int l = in[i];
    if (l == 2 && i + 3 <= inlen && memcmp(in + i + 1, "h2", 2) == 0) {
      *out = in + i + 1;
      *outlen = 2;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + l;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* A client hello without ALPN would otherwise complete the handshake and
 * only then be dropped: refuse it at once with the alert that says why. */
static int need_alpn(SSL *ssl, int *alert, void *arg) {
  (void)arg;
  const unsigned char *ext;
  size_t len;
  if (SSL_client_hello_get0_ext(
          ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &ext,
          &len) == 1)
    return SSL_CLIENT_HELLO_SUCCESS;
  *alert = SSL_AD_NO_APPLICATION_PROTOCOL;
  return SSL_CLIENT_HELLO_ERROR;
}

int sluice__tls_ctx_server(sluice__tls_ctx **out,
                           const sluice_tls_server_config *cfg, char *err,
                           size_t errlen) {
  if (!out || !cfg || !given(&cfg->cert) || !given(&cfg->key)) {
    snprintf(err, errlen, "a TLS server needs a certificate and its key");
    return SLUICE_ERR_INVALID_ARG;
  }
  if (cfg->client_cert != SLUICE_CLIENT_CERT_NONE && !given(&cfg->client_ca)) {
    snprintf(err, errlen, "checking client certificates needs client_ca");
    return SLUICE_ERR_INVALID_ARG;
  }
  SSL_CTX *ctx = ctx_common(TLS_server_method());
  if (!ctx) {
    snprintf(err, errlen, "out of memory");
    return SLUICE_ERR_NOMEM;
  }
  SSL_CTX_set_alpn_select_cb(ctx, select_h2, NULL);
  SSL_CTX_set_client_hello_cb(ctx, need_alpn, NULL);
  int rv = load_cert_and_key(ctx, &cfg->cert, &cfg->key, err, errlen);
  if (rv == 0 && cfg->client_cert != SLUICE_CLIENT_CERT_NONE) {
    rv = load_cas(ctx, &cfg->client_ca, 1, err, errlen);
    int mode = SSL_VERIFY_PEER;
    if (cfg->client_cert == SLUICE_CLIENT_CERT_REQUIRE)
      mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, NULL);
  }
  if (rv != 0) {
    SSL_CTX_free(ctx);
    return rv;
  }
  *out = ctx;
  return 0;
}

void sluice__tls_ctx_ref(sluice__tls_ctx *ctx) {
  if (ctx)
    SSL_CTX_up_ref(ctx);
}

void sluice__tls_ctx_unref(sluice__tls_ctx *ctx) {
  if (ctx)
    SSL_CTX_free(ctx);
}

/* ---- connections */

static int is_ip_literal(const char *name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name, buf) == 1 ||
         inet_pton(AF_INET6, name, buf) == 1;
}

sluice__tls *sluice__tls_new(sluice__tls_ctx *ctx, int is_client,
                             const char *name) {
  sluice__tls *t = sluice__calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->is_client = is_client;
  t->ssl = SSL_new(ctx);
  t->in = BIO_new(BIO_s_mem());
  t->out = BIO_new(BIO_s_mem());
  if (!t->ssl || !t->in || !t->out) {
    SSL_free(t->ssl);
    BIO_free(t->in);
    BIO_free(t->out);
    free(t);
    return NULL;
  }
  /* An empty input BIO means "wait for more", not end of file. */
  BIO_set_mem_eof_return(t->in, -1);
  SSL_set_bio(t->ssl, t->in, t->out);
  if (is_client) {
    SSL_set_connect_state(t->ssl);
    if (name && *name) {
      if (is_ip_literal(name)) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), name);
      } else {
        SSL_set_tlsext_host_name(t->ssl, name);
        SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        SSL_set1_host(t->ssl, name);
      }
    }
  } else {
    SSL_set_accept_state(t->ssl);
  }
  return t;
}

void sluice__tls_del(sluice__tls *t) {
  if (!t)
    return;
  SSL_free(t->ssl);
  free(t);
}

/* Records why the session failed, preferring the certificate check's own
 * words ("certificate has expired", "hostname mismatch"). */
static void fail(sluice__tls *t, const char *stage) {
  long v = SSL_get_verify_result(t->ssl);
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  if (v != X509_V_OK && (t->is_client || !t->established))
    snprintf(t->err, sizeof t->err, "%s: certificate verify failed: %s", stage,
             X509_verify_cert_error_string(v));
  else if (r && t->is_client && !t->established &&
           (strstr(r, "wrong version number") || strstr(r, "packet length")))
    snprintf(t->err, sizeof t->err,
             "%s: %s (is the server speaking plaintext, not TLS?)", stage, r);
  else if (r)
    snprintf(t->err, sizeof t->err, "%s: %s", stage, r);
  else
    snprintf(t->err, sizeof t->err, "%s: connection closed", stage);
  ERR_clear_error();
}

static sluice__tls_state drive(sluice__tls *t) {
  ERR_clear_error();
  int rv = SSL_do_handshake(t->ssl);
  if (rv == 1) {
    const unsigned char *p = NULL;
    unsigned int len = 0;
    SSL_get0_alpn_selected(t->ssl, &p, &len);
    if (len != 2 || memcmp(p, "h2", 2) != 0) {
      snprintf(t->err, sizeof t->err,
               "TLS handshake: peer did not agree on HTTP/2 (ALPN h2)");
      return SLUICE__TLS_ERROR;
    }
    t->established = 1;
    return SLUICE__TLS_ESTABLISHED;
  }
  int e = SSL_get_error(t->ssl, rv);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return SLUICE__TLS_AGAIN;
  fail(t, "TLS handshake failed");
  return SLUICE__TLS_ERROR;
}

sluice__tls_state sluice__tls_start(sluice__tls *t) {
  return t->is_client ? drive(t) : SLUICE__TLS_AGAIN;
}

sluice__tls_state sluice__tls_feed(sluice__tls *t, const uint8_t *data,
                                   size_t len) {
  if (len && BIO_write(t->in, data, (int)len) != (int)len) {
    snprintf(t->err, sizeof t->err, "TLS: out of memory");
    return SLUICE__TLS_ERROR;
  }
  if (t->established)
    return SLUICE__TLS_AGAIN;
  return drive(t);
}

int sluice__tls_established(const sluice__tls *t) { return t->established; }

ssize_t sluice__tls_read(sluice__tls *t, uint8_t *buf, size_t cap) {
  ERR_clear_error();
  int n = SSL_read(t->ssl, buf, (int)(cap > 1 << 30 ? 1 << 30 : cap));
  if (n > 0)
    return n;
  int e = SSL_get_error(t->ssl, n);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return 0;
  if (e == SSL_ERROR_ZERO_RETURN)
    snprintf(t->err, sizeof t->err, "connection closed by peer (TLS)");
  else
    fail(t, "TLS error");
  return -1;
}

int sluice__tls_write(sluice__tls *t, const uint8_t *data, size_t len) {
  ERR_clear_error();
  while (len) {
    int chunk = len > 1 << 30 ? 1 << 30 : (int)len;
    int n = SSL_write(t->ssl, data, chunk);
    if (n <= 0) {
      fail(t, "TLS error");
      return -1;
    }
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

size_t sluice__tls_pending(const sluice__tls *t) {
  return BIO_ctrl_pending(t->out);
}

size_t sluice__tls_take(sluice__tls *t, uint8_t *buf, size_t cap) {
  int n = BIO_read(t->out, buf, (int)(cap > 1 << 30 ? 1 << 30 : cap));
  return n > 0 ? (size_t)n : 0;
}

void sluice__tls_close_notify(sluice__tls *t) {
  if (!t->established || (SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN))
    return;
  ERR_clear_error();
  SSL_shutdown(t->ssl); /* 0: sent, the peer's own alert is not awaited */
  ERR_clear_error();
}

const char *sluice__tls_error(const sluice__tls *t) { return t->err; }

char *sluice__tls_peer_subject(const sluice__tls *t) {
  X509 *x = SSL_get1_peer_certificate(t->ssl);
  if (!x)
    return NULL;
  char *s = NULL;
  if (SSL_get_verify_result(t->ssl) == X509_V_OK) {
    BIO *b = BIO_new(BIO_s_mem());
    if (b && X509_NAME_print_ex(b, X509_get_subject_name(x), 0,
                                XN_FLAG_RFC2253) >= 0) {
      size_t n = BIO_ctrl_pending(b);
      s = sluice__malloc(n + 1);
      if (s) {
        int got = BIO_read(b, s, (int)n);
        s[got > 0 ? got : 0] = 0;
      }
    }
    BIO_free(b);
  }
  X509_free(x);
  return s;
}
