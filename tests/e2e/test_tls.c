/* e2e: TLS and mutual TLS (sluice/tls.h) on loopback.
 *
 * The certificates are made at run time by scripts/gen-test-certs.sh (path
 * in SLUICE_GEN_CERTS) in a fresh temporary directory, removed at the end.
 * Each test runs its own e2e.Echo server (2 loop threads) whose handler
 * answers "whoami" with the caller's verified client-certificate subject
 * (sluice_server_call_peer_identity) and echoes any other text.
 *
 * Covered: server authentication by CA file and by PEM in memory, the
 * target forms (name override, IPv4 and IPv6 SANs, DNS name); mutual TLS and
 * the peer identity; handshake failures (wrong CA, system roots, expired,
 * wrong host, missing or untrusted client certificate, TLS against plaintext
 * both ways) reported as UNAVAILABLE with a message naming the cause; 200
 * concurrent handshakes; the shared fixture over TLS (3 MiB messages, server
 * shutdown with held calls); client renegotiation and ALPN without h2
 * refused (checked with the openssl command line client); credential errors
 * when the options are set. */
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_common.h"

#ifndef SLUICE_GEN_CERTS
#error "SLUICE_GEN_CERTS must name scripts/gen-test-certs.sh (see CMakeLists)"
#endif

/* Deadline of calls expected to fail: they must fail with UNAVAILABLE before
 * it, never wait for it. */
#define FAIL_DEADLINE_MS 5000u

static char g_dir[256]; /* the certificates */

/* DIR/name. Rotating static buffers: valid for the next 15 calls, enough for
 * one configuration (the library copies what it keeps). */
static const char *cert(const char *name) {
  static char bufs[16][512];
  static unsigned next;
  char *b = bufs[next++ % 16];
  snprintf(b, sizeof bufs[0], "%s/%s", g_dir, name);
  return b;
}

/* Case-insensitive strstr (strcasestr is a GNU extension). */
static int contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay != '\0'; hay++) {
    size_t i = 0;
    while (i < n && hay[i] != '\0' &&
           tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
      i++;
    if (i == n)
      return 1;
  }
  return 0;
}

/* Reads a whole file (NUL-terminated, NULs inside replaced by '.'). */
static char *slurp(const char *path, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t n;
  while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len - 1 == 0) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  fclose(f);
  for (size_t i = 0; i < len; i++)
    if (buf[i] == '\0')
      buf[i] = '.';
  buf[len] = '\0';
  if (len_out != NULL)
    *len_out = len;
  return buf;
}

/* ---- server */

typedef struct tls_srv {
  sluice_server *srv;
  int port;
  atomic_int calls;
} tls_srv;

static void handle(sluice_server_call *call, const E2e__EchoMsg *req,
                   void *user_data) {
  tls_srv *s = user_data;
  atomic_fetch_add(&s->calls, 1);
  const char *id = sluice_server_call_peer_identity(call);
  char text[512];
  if (req->text != NULL && strcmp(req->text, "whoami") == 0)
    snprintf(text, sizeof text, "%s", id != NULL ? id : "(none)");
  else
    snprintf(text, sizeof text, "%s", req->text != NULL ? req->text : "");
  E2e__EchoMsg out = E2E__ECHO_MSG__INIT;
  out.text = text;
  sluice_server_call_reply(call, &out.base);
}

/* A server on address with opts (deleted here: the server must not need
 * them after sluice_server_new). */
static tls_srv *srv_start_at(sluice_server_opts *opts, const char *address) {
  tls_srv *s = calloc(1, sizeof *s);
  assert_non_null(s);
  atomic_init(&s->calls, 0);
  const E2e__Echo_SluiceHandlers handlers = {.echo = handle, .big = handle};
  assert_int_equal(sluice_server_new(&s->srv, opts), 0);
  sluice_server_opts_del(opts);
  assert_int_equal(e2e__echo__sluice_register(s->srv, &handlers, s), 0);
  assert_int_equal(sluice_server_listen(s->srv, address, &s->port), 0);
  assert_int_equal(sluice_server_start(s->srv), 0);
  return s;
}

static tls_srv *srv_start(sluice_server_opts *opts) {
  return srv_start_at(opts, "127.0.0.1:0");
}

static void srv_free(tls_srv *s) {
  sluice_server_del(s->srv);
  free(s);
}

static sluice_server_opts *server_opts(void) {
  sluice_server_opts *so = NULL;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_int_equal(sluice_server_opts_set_threads(so, 2), 0);
  return so;
}

/* A TLS server on address with cert/key files (names in the certificate
 * directory) and, when client_ca is not NULL, client certificates in mode. */
static tls_srv *tls_server_at(const char *address, const char *crt,
                              const char *key, const char *client_ca,
                              sluice_client_cert_mode mode) {
  sluice_server_opts *so = server_opts();
  sluice_tls_server_config c;
  sluice_tls_server_config_init(&c);
  c.cert.file = cert(crt);
  c.key.file = cert(key);
  if (client_ca != NULL)
    c.client_ca.file = cert(client_ca);
  c.client_cert = mode;
  int rc = sluice_server_opts_set_tls(so, &c);
  if (rc != 0)
    fail_msg("sluice_server_opts_set_tls: %s: %s", sluice_strerror(rc),
             sluice_server_opts_last_error(so));
  return srv_start_at(so, address);
}

static tls_srv *tls_server(const char *crt, const char *key,
                           const char *client_ca,
                           sluice_client_cert_mode mode) {
  return tls_server_at("127.0.0.1:0", crt, key, client_ca, mode);
}

/* Whether ::1 can be bound here. */
static int have_ipv6_loopback(void) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  struct sockaddr_in6 sa;
  memset(&sa, 0, sizeof sa);
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

static tls_srv *plain_server(void) { return srv_start(server_opts()); }

/* ---- client */

/* A channel to target_fmt (with one %d for the port). ca NULL: plaintext.
 * cert/key: client certificate files (NULL: none). */
static sluice_channel *channel(const char *target_fmt, int port, const char *ca,
                               const char *crt, const char *key,
                               const char *override) {
  char target[128];
  snprintf(target, sizeof target, target_fmt, port);
  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  if (ca != NULL) {
    sluice_tls_client_config c;
    sluice_tls_client_config_init(&c);
    c.ca.file = cert(ca);
    if (crt != NULL) {
      c.cert.file = cert(crt);
      c.key.file = cert(key);
    }
    c.server_name_override = override;
    int rc = sluice_channel_opts_set_tls(co, &c);
    if (rc != 0)
      fail_msg("sluice_channel_opts_set_tls: %s: %s", sluice_strerror(rc),
               sluice_channel_opts_last_error(co));
  }
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, co), 0);
  sluice_channel_opts_del(co);
  return ch;
}

/* The usual client: CA file, target ipv4:127.0.0.1, override server.test. */
static sluice_channel *tls_channel(int port) {
  return channel("ipv4:127.0.0.1:%d", port, "ca.pem", NULL, NULL,
                 "server.test");
}

/* One blocking Echo call with timeout_ms; the status message goes to msg and
 * the reply's text to out (either may be NULL). */
static sluice_status_code call_text(sluice_channel *ch, const char *text,
                                    uint64_t timeout_ms, char *msg,
                                    size_t msg_size, char *out,
                                    size_t out_size) {
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT, *resp = NULL;
  req.text = (char *)text;
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = timeout_ms;
  sluice_status st;
  sluice_status_init(&st);
  sluice_status_code code =
      e2e__echo__echo__blocking(ch, &req, &resp, &opts, &st);
  if (msg != NULL)
    snprintf(msg, msg_size, "%s", st.message != NULL ? st.message : "(null)");
  if (out != NULL)
    snprintf(out, out_size, "%s",
             resp != NULL && resp->text != NULL ? resp->text : "");
  if (code == SLUICE_STATUS_OK)
    assert_non_null(resp);
  else
    assert_null(resp);
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  return code;
}

/* A call that must succeed and come back with expect as its text. */
static void expect_ok(sluice_channel *ch, const char *label, const char *text,
                      const char *expect) {
  char msg[512], out[512];
  sluice_status_code code =
      call_text(ch, text, E2E_HANG_MS, msg, sizeof msg, out, sizeof out);
  if (code != SLUICE_STATUS_OK)
    fail_msg("%s: %s: %s", label, sluice_status_name(code), msg);
  assert_string_equal(out, expect);
}

/* A call that must fail with UNAVAILABLE before FAIL_DEADLINE_MS, with a
 * message containing every word of all_of and, when any_of is not empty, at
 * least one of any_of (case-insensitive; NULL-terminated lists). */
static void expect_unavailable(sluice_channel *ch, const char *label,
                               const char *const *all_of,
                               const char *const *any_of) {
  char msg[512];
  uint64_t t0 = e2e_now_ms();
  sluice_status_code code =
      call_text(ch, "x", FAIL_DEADLINE_MS, msg, sizeof msg, NULL, 0);
  uint64_t took = e2e_now_ms() - t0;
  print_message("%s: %s \"%s\" (%llu ms)\n", label, sluice_status_name(code),
                msg, (unsigned long long)took);
  if (code != SLUICE_STATUS_UNAVAILABLE)
    fail_msg("%s: expected UNAVAILABLE, got %s: %s", label,
             sluice_status_name(code), msg);
  assert_true(took < FAIL_DEADLINE_MS);
  for (; all_of != NULL && *all_of != NULL; all_of++)
    if (!contains_ci(msg, *all_of))
      fail_msg("%s: message \"%s\" does not mention \"%s\"", label, msg,
               *all_of);
  if (any_of != NULL && *any_of != NULL) {
    int found = 0;
    for (const char *const *w = any_of; *w != NULL; w++)
      found |= contains_ci(msg, *w);
    if (!found)
      fail_msg("%s: message \"%s\" names none of the expected causes (\"%s\" "
               "...)",
               label, msg, any_of[0]);
  }
}

/* The server still serves a well-formed TLS call. */
static void assert_tls_healthy(const tls_srv *s) {
  sluice_channel *ch = tls_channel(s->port);
  expect_ok(ch, "healthy", "still there", "still there");
  sluice_channel_del(ch);
}

/* ---- 1. server authentication */

static void test_tls_ok(void **state) {
  (void)state;
  tls_srv *s = tls_server("server.pem", "server.key", NULL, 0);

  sluice_channel *ch = tls_channel(s->port);
  expect_ok(ch, "override server.test", "hello", "hello");
  expect_ok(ch, "same connection", "again", "again");
  /* Not a mutual-TLS call: no peer identity. */
  expect_ok(ch, "whoami", "whoami", "(none)");
  sluice_channel_del(ch);

  /* An IP literal is checked against the IP SANs. */
  ch = channel("ipv4:127.0.0.1:%d", s->port, "ca.pem", NULL, NULL, NULL);
  expect_ok(ch, "IP SAN", "by address", "by address");
  sluice_channel_del(ch);

  /* A DNS name against the DNS SANs (localhost may also resolve to ::1,
   * where nothing listens). */
  ch = channel("localhost:%d", s->port, "ca.pem", NULL, NULL, NULL);
  expect_ok(ch, "localhost", "by name", "by name");
  sluice_channel_del(ch);
  ch = channel("dns:localhost:%d", s->port, "ca.pem", NULL, NULL, NULL);
  expect_ok(ch, "dns:localhost", "by dns name", "by dns name");
  sluice_channel_del(ch);

  assert_int_equal(atomic_load(&s->calls), 6);
  srv_free(s);

  /* An IPv6 literal against the IP SAN ::1. */
  if (have_ipv6_loopback()) {
    s = tls_server_at("[::1]:0", "server.pem", "server.key", NULL, 0);
    ch = channel("ipv6:[::1]:%d", s->port, "ca.pem", NULL, NULL, NULL);
    expect_ok(ch, "IPv6 SAN", "by v6 address", "by v6 address");
    sluice_channel_del(ch);
    srv_free(s);
  } else {
    print_message("no IPv6 loopback: IPv6 SAN not checked\n");
  }
}

/* ---- 2. PEM in memory */

static void test_pem_in_memory(void **state) {
  (void)state;
  size_t crt_len, key_len, ca_len;
  char *crt = slurp(cert("server.pem"), &crt_len);
  char *key = slurp(cert("server.key"), &key_len);
  char *ca = slurp(cert("ca.pem"), &ca_len);
  assert_non_null(crt);
  assert_non_null(key);
  assert_non_null(ca);

  sluice_server_opts *so = server_opts();
  sluice_tls_server_config sc;
  sluice_tls_server_config_init(&sc);
  sc.cert.data = crt;
  sc.cert.len = crt_len;
  sc.key.data = key;
  sc.key.len = key_len;
  int rc = sluice_server_opts_set_tls(so, &sc);
  if (rc != 0)
    fail_msg("server: %s", sluice_server_opts_last_error(so));
  /* The configuration was copied: the buffers may go now. */
  memset(crt, 'x', crt_len);
  memset(key, 'x', key_len);
  free(crt);
  free(key);
  tls_srv *s = srv_start(so);

  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  sluice_tls_client_config cc;
  sluice_tls_client_config_init(&cc);
  cc.ca.data = ca;
  cc.ca.len = ca_len;
  char override[] = "server.test";
  cc.server_name_override = override;
  rc = sluice_channel_opts_set_tls(co, &cc);
  if (rc != 0)
    fail_msg("client: %s", sluice_channel_opts_last_error(co));
  memset(ca, 'x', ca_len);
  free(ca);
  memset(override, 'x', sizeof override - 1);
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", s->port);
  sluice_channel *ch = NULL;
  assert_int_equal(sluice_channel_new(&ch, target, co), 0);
  sluice_channel_opts_del(co);

  expect_ok(ch, "PEM in memory", "from memory", "from memory");
  sluice_channel_del(ch);
  srv_free(s);
}

/* ---- 3. mutual TLS */

static void test_mtls(void **state) {
  (void)state;
  tls_srv *s = tls_server("server.pem", "server.key", "ca.pem",
                          SLUICE_CLIENT_CERT_REQUIRE);
  sluice_channel *ch = channel("ipv4:127.0.0.1:%d", s->port, "ca.pem",
                               "client.pem", "client.key", "server.test");
  char msg[512], out[512];
  sluice_status_code code =
      call_text(ch, "whoami", E2E_HANG_MS, msg, sizeof msg, out, sizeof out);
  if (code != SLUICE_STATUS_OK)
    fail_msg("mTLS: %s: %s", sluice_status_name(code), msg);
  print_message("peer identity: \"%s\"\n", out);
  if (strstr(out, "CN=sluice-test-client") == NULL)
    fail_msg("peer identity \"%s\" lacks CN=sluice-test-client", out);
  expect_ok(ch, "mTLS echo", "hi", "hi");
  sluice_channel_del(ch);
  srv_free(s);

  /* REQUEST: a certificate is optional, and reported when sent. */
  s = tls_server("server.pem", "server.key", "ca.pem",
                 SLUICE_CLIENT_CERT_REQUEST);
  ch = channel("ipv4:127.0.0.1:%d", s->port, "ca.pem", "client.pem",
               "client.key", "server.test");
  assert_int_equal(
      call_text(ch, "whoami", E2E_HANG_MS, msg, sizeof msg, out, sizeof out),
      SLUICE_STATUS_OK);
  if (strstr(out, "CN=sluice-test-client") == NULL)
    fail_msg("REQUEST: peer identity \"%s\"", out);
  sluice_channel_del(ch);
  ch = tls_channel(s->port);
  expect_ok(ch, "REQUEST without a certificate", "whoami", "(none)");
  sluice_channel_del(ch);
  srv_free(s);

  /* Plaintext: no identity. */
  s = plain_server();
  ch = channel("ipv4:127.0.0.1:%d", s->port, NULL, NULL, NULL, NULL);
  expect_ok(ch, "plaintext", "whoami", "(none)");
  sluice_channel_del(ch);
  srv_free(s);
}

/* ---- 4. handshake failures */

static void test_wrong_ca(void **state) {
  (void)state;
  tls_srv *s = tls_server("untrusted.pem", "untrusted.key", NULL, 0);
  sluice_channel *ch = tls_channel(s->port);
  const char *all[] = {"certificate", NULL};
  const char *any[] = {"verify", "issuer", NULL};
  expect_unavailable(ch, "wrong CA", all, any);
  /* Again on the same channel (after back-off or at once): same answer. */
  expect_unavailable(ch, "wrong CA, again", all, any);
  sluice_channel_del(ch);
  /* No CA given: the system's roots, which do not know the test CA. */
  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  sluice_tls_client_config cc;
  sluice_tls_client_config_init(&cc);
  cc.server_name_override = "server.test";
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), 0);
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", s->port);
  assert_int_equal(sluice_channel_new(&ch, target, co), 0);
  sluice_channel_opts_del(co);
  expect_unavailable(ch, "system roots", all, any);
  sluice_channel_del(ch);
  assert_int_equal(atomic_load(&s->calls), 0);
  srv_free(s);
}

static void test_expired(void **state) {
  (void)state;
  tls_srv *s = tls_server("expired.pem", "expired.key", NULL, 0);
  sluice_channel *ch = tls_channel(s->port);
  const char *all[] = {"expired", NULL};
  expect_unavailable(ch, "expired", all, NULL);
  sluice_channel_del(ch);
  assert_int_equal(atomic_load(&s->calls), 0);
  srv_free(s);
}

static void test_wrong_host(void **state) {
  (void)state;
  tls_srv *s = tls_server("wronghost.pem", "wronghost.key", NULL, 0);
  const char *any[] = {"hostname", "host name", NULL};
  sluice_channel *ch = tls_channel(s->port); /* override server.test */
  expect_unavailable(ch, "wrong host (override)", NULL, any);
  sluice_channel_del(ch);
  /* The IP address is not in that certificate either. */
  ch = channel("ipv4:127.0.0.1:%d", s->port, "ca.pem", NULL, NULL, NULL);
  const char *any_ip[] = {"hostname", "host name", "ip address", "mismatch",
                          NULL};
  expect_unavailable(ch, "wrong host (IP)", NULL, any_ip);
  sluice_channel_del(ch);
  assert_int_equal(atomic_load(&s->calls), 0);
  srv_free(s);
}

static void test_client_cert_required(void **state) {
  (void)state;
  tls_srv *s = tls_server("server.pem", "server.key", "ca.pem",
                          SLUICE_CLIENT_CERT_REQUIRE);
  const char *all[] = {"certificate", NULL};
  sluice_channel *ch = tls_channel(s->port);
  expect_unavailable(ch, "REQUIRE, no client certificate", all, NULL);
  sluice_channel_del(ch);

  /* A client certificate from another CA. */
  ch = channel("ipv4:127.0.0.1:%d", s->port, "ca.pem", "untrusted.pem",
               "untrusted.key", "server.test");
  expect_unavailable(ch, "REQUIRE, untrusted client certificate", NULL, NULL);
  sluice_channel_del(ch);
  assert_int_equal(atomic_load(&s->calls), 0);

  /* A good client still gets through. */
  ch = channel("ipv4:127.0.0.1:%d", s->port, "ca.pem", "client.pem",
               "client.key", "server.test");
  expect_ok(ch, "REQUIRE, good client", "ok", "ok");
  sluice_channel_del(ch);
  srv_free(s);
}

static void test_plaintext_mismatch(void **state) {
  (void)state;
  /* A plaintext client to a TLS server. */
  tls_srv *s = tls_server("server.pem", "server.key", NULL, 0);
  sluice_channel *ch =
      channel("ipv4:127.0.0.1:%d", s->port, NULL, NULL, NULL, NULL);
  static const char *const expecting_tls[] = {"expecting TLS", NULL};
  expect_unavailable(ch, "plaintext client, TLS server", expecting_tls, NULL);
  sluice_channel_del(ch);
  assert_int_equal(atomic_load(&s->calls), 0);
  assert_tls_healthy(s);
  srv_free(s);

  /* A TLS client to a plaintext server. */
  s = plain_server();
  ch = tls_channel(s->port);
  static const char *const speaking_plain[] = {"plaintext", NULL};
  expect_unavailable(ch, "TLS client, plaintext server", speaking_plain, NULL);
  sluice_channel_del(ch);
  assert_int_equal(atomic_load(&s->calls), 0);
  ch = channel("ipv4:127.0.0.1:%d", s->port, NULL, NULL, NULL, NULL);
  expect_ok(ch, "plaintext still served", "plain", "plain");
  sluice_channel_del(ch);
  srv_free(s);
}

/* ---- 5. concurrent handshakes */

#define N_CONC 200

typedef struct conc {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  atomic_int fired[N_CONC];
  sluice_status_code code[N_CONC];
  int text_ok[N_CONC];
  char first_err[256];
} conc;

typedef struct conc_slot {
  conc *c;
  int i;
} conc_slot;

static void conc_cb(const sluice_status *st, const E2e__EchoMsg *resp,
                    void *user_data) {
  conc_slot *slot = user_data;
  conc *c = slot->c;
  char want[16];
  snprintf(want, sizeof want, "c%d", slot->i);
  atomic_fetch_add(&c->fired[slot->i], 1);
  pthread_mutex_lock(&c->mu);
  c->code[slot->i] = st->code;
  c->text_ok[slot->i] =
      resp != NULL && resp->text != NULL && strcmp(resp->text, want) == 0;
  if (st->code != SLUICE_STATUS_OK && c->first_err[0] == '\0')
    snprintf(c->first_err, sizeof c->first_err, "%s: %s",
             sluice_status_name(st->code),
             st->message != NULL ? st->message : "(null)");
  c->done++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void test_concurrent_handshakes(void **state) {
  (void)state;
  tls_srv *s = tls_server("server.pem", "server.key", NULL, 0);
  conc *c = calloc(1, sizeof *c);
  conc_slot *slots = calloc(N_CONC, sizeof *slots);
  sluice_channel **chs = calloc(N_CONC, sizeof *chs);
  assert_non_null(c);
  assert_non_null(slots);
  assert_non_null(chs);
  pthread_mutex_init(&c->mu, NULL);
  e2e_cond_init(&c->cv);
  for (int i = 0; i < N_CONC; i++)
    atomic_init(&c->fired[i], 0);

  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  sluice_tls_client_config cc;
  sluice_tls_client_config_init(&cc);
  cc.ca.file = cert("ca.pem");
  cc.server_name_override = "server.test";
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), 0);
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", s->port);
  for (int i = 0; i < N_CONC; i++)
    assert_int_equal(sluice_channel_new(&chs[i], target, co), 0);
  sluice_channel_opts_del(co);

  /* Every call starts a connection, hence a handshake, at once. */
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = E2E_HANG_MS;
  for (int i = 0; i < N_CONC; i++) {
    char text[16];
    snprintf(text, sizeof text, "c%d", i);
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT;
    req.text = text;
    slots[i].c = c;
    slots[i].i = i;
    assert_int_equal(
        e2e__echo__echo__async(chs[i], &req, &opts, conc_cb, &slots[i]), 0);
  }

  /* Longer than the calls' own deadline, so that a slow call shows up as
   * DEADLINE_EXCEEDED rather than as a missing callback. */
  struct timespec ts;
  e2e_abs_ms(&ts, E2E_HANG_MS + 5000u);
  int rc = 0;
  pthread_mutex_lock(&c->mu);
  while (c->done < N_CONC && rc == 0)
    rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  int done = c->done;
  pthread_mutex_unlock(&c->mu);
  if (done != N_CONC)
    fail_msg("%d of %d callbacks fired", done, N_CONC);

  e2e_sleep_ms(50); /* a second callback would show up here */
  int ok = 0, text_ok = 0;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < N_CONC; i++) {
    if (atomic_load(&c->fired[i]) != 1)
      fail_msg("call %d: callback fired %d times", i,
               atomic_load(&c->fired[i]));
    ok += c->code[i] == SLUICE_STATUS_OK;
    text_ok += c->text_ok[i];
  }
  pthread_mutex_unlock(&c->mu);
  print_message("%d/%d OK%s%s\n", ok, N_CONC,
                ok < N_CONC ? ", first error " : "", c->first_err);
  assert_int_equal(ok, N_CONC);
  assert_int_equal(text_ok, N_CONC);
  assert_int_equal(atomic_load(&s->calls), N_CONC);

  for (int i = 0; i < N_CONC; i++)
    sluice_channel_del(chs[i]);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(chs);
  free(slots);
  free(c);
  srv_free(s);
}

/* ---- the shared e2e fixture over TLS: big messages, server shutdown */

static void test_fixture_over_tls(void **state) {
  (void)state;
  sluice_server_opts *so = server_opts();
  sluice_tls_server_config sc;
  sluice_tls_server_config_init(&sc);
  sc.cert.file = cert("server.pem");
  sc.key.file = cert("server.key");
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), 0);
  e2e_server *s = e2e_server_start(NULL, so);
  sluice_server_opts_del(so);

  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  sluice_tls_client_config cc;
  sluice_tls_client_config_init(&cc);
  cc.ca.file = cert("ca.pem");
  cc.server_name_override = "server.test";
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), 0);
  sluice_channel *ch = e2e_channel(s, co);
  sluice_channel_opts_del(co);

  /* Messages of many TLS records each way (3 MiB: under the 4 MiB limit). */
  size_t big = 3u << 20;
  uint8_t *data = malloc(big);
  assert_non_null(data);
  e2e_fill(data, big);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT, *resp = NULL;
  req.text = "big";
  req.payload.data = data;
  req.payload.len = big;
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = E2E_HANG_MS;
  sluice_status st;
  sluice_status_init(&st);
  sluice_status_code code =
      e2e__echo__big__blocking(ch, &req, &resp, &opts, &st);
  if (code != SLUICE_STATUS_OK)
    fail_msg("big echo: %s: %s", sluice_status_name(code), st.message);
  assert_int_equal(resp->payload.len, big);
  assert_true(e2e_check(resp->payload.data, resp->payload.len));
  protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  free(data);

  /* Held calls, then the server goes away: every call ends, once. */
  enum { HELD = 20 };
  e2e_wait w;
  e2e_wait_init(&w);
  E2e__EchoMsg held = E2E__ECHO_MSG__INIT;
  held.text = "held";
  held.hold = 1;
  for (int i = 0; i < HELD; i++)
    assert_int_equal(e2e__echo__echo__async(ch, &held, &opts, e2e_wait_cb, &w),
                     0);
  assert_int_equal(e2e_server_wait_held(s, HELD, E2E_HANG_MS), 0);
  assert_int_equal(sluice_server_shutdown(s->srv, 100), 0);
  assert_int_equal(e2e_wait_for(&w, HELD, E2E_HANG_MS), HELD);
  print_message("held calls at shutdown: last %s \"%s\"\n",
                sluice_status_name(w.code), w.message);
  if (w.code != SLUICE_STATUS_UNAVAILABLE && w.code != SLUICE_STATUS_CANCELLED)
    fail_msg("held call: %s: %s", sluice_status_name(w.code), w.message);
  assert_int_equal(e2e_server_release(s, SLUICE_STATUS_OK), HELD);
  e2e_sleep_ms(50);
  assert_int_equal(e2e_wait_for(&w, HELD + 1, 0), HELD); /* exactly once */
  e2e_wait_destroy(&w);
  sluice_channel_del(ch);
  e2e_server_free(s);
}

/* ---- 6, 7. the openssl command line client against the server */

/* Runs "stdin_cmd | timeout 10 openssl s_client -connect 127.0.0.1:PORT
 * extra -CAfile ca.pem -servername server.test -state" (stdin_cmd NULL:
 * stdin from /dev/null) and returns its output (malloc'd) and exit status. */
static char *s_client(int port, const char *stdin_cmd, const char *extra,
                      int *exit_status) {
  char out_path[512], cmd[2048];
  snprintf(out_path, sizeof out_path, "%s/s_client.out", g_dir);
  snprintf(cmd, sizeof cmd,
           "%s%s timeout 10 openssl s_client -connect 127.0.0.1:%d %s "
           "-CAfile '%s' -servername server.test -state %s >'%s' 2>&1",
           stdin_cmd != NULL ? stdin_cmd : "", stdin_cmd != NULL ? " |" : "",
           port, extra, cert("ca.pem"), stdin_cmd != NULL ? "" : "</dev/null",
           out_path);
  int rc = system(cmd);
  assert_true(rc != -1 && WIFEXITED(rc));
  *exit_status = WEXITSTATUS(rc);
  char *out = slurp(out_path, NULL);
  assert_non_null(out);
  unlink(out_path);
  return out;
}

/* Prints the lines of s_client's output that tell what happened. */
static void print_outcome(const char *label, const char *out, int status) {
  print_message("%s: s_client exit status %d\n", label, status);
  const char *keys[] = {"ALPN",   "alert", "error",         "RENEGOT",
                        "closed", "DONE",  "Verify return", NULL};
  const char *line = out;
  while (*line != '\0') {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 400 ? len : 400), line);
    for (char *b = buf; *b != '\0'; b++)
      if (!isprint((unsigned char)*b))
        *b = '.';
    for (const char **k = keys; *k != NULL; k++)
      if (contains_ci(buf, *k)) {
        print_message("  | %s\n", buf);
        break;
      }
    line += len + (end != NULL);
  }
}

static void test_renegotiation_refused(void **state) {
  (void)state;
  tls_srv *s = tls_server("server.pem", "server.key", NULL, 0);
  int status;
  /* "R" asks s_client to renegotiate (TLS 1.2 only); stdin stays open for
   * 3 s, then EOF ends s_client if the server has not closed first. */
  char *out = s_client(s->port, "(printf 'R\\n'; sleep 3)", "-tls1_2 -alpn h2",
                       &status);
  print_outcome("renegotiation", out, status);
  assert_int_not_equal(status, 124); /* not killed by timeout */
  /* The first handshake worked, with h2. */
  if (!contains_ci(out, "ALPN protocol: h2"))
    fail_msg("first handshake failed:\n%s", out);
  const char *after = strstr(out, "RENEGOTIATING");
  if (after == NULL)
    fail_msg("s_client did not try to renegotiate:\n%s", out);
  /* No second handshake: the server never answered the new ClientHello ... */
  assert_false(contains_ci(after, "read server hello"));
  assert_false(contains_ci(after, "read finished"));
  /* ... but refused it (OpenSSL's server sends a no_renegotiation alert, and
   * s_client gives up with an error), or closed the connection. */
  if (!contains_ci(after, "no renegotiation") && !contains_ci(after, "error") &&
      !contains_ci(after, "closed"))
    fail_msg("renegotiation neither refused nor closed:\n%s", after);
  free(out);
  assert_int_equal(atomic_load(&s->calls), 0);
  assert_tls_healthy(s);
  srv_free(s);
}

typedef struct delayed_shutdown {
  sluice_server *srv;
  unsigned after_ms;
} delayed_shutdown;

static void *shutdown_later(void *p) {
  delayed_shutdown *d = p;
  e2e_sleep_ms(d->after_ms);
  sluice_server_shutdown(d->srv, 2000);
  return NULL;
}

/* A graceful close ends TLS with a close_notify alert, so the peer can tell
 * the end of the connection from a truncation: s_client (HTTP/2 preface and
 * an empty SETTINGS sent, then idle) must see the server's GOAWAY and a
 * clean close, not "unexpected eof". */
static void test_close_notify(void **state) {
  (void)state;
  tls_srv *s = tls_server("server.pem", "server.key", NULL, 0);
  delayed_shutdown d = {s->srv, 1000};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, shutdown_later, &d), 0);
  int status;
  char *out =
      s_client(s->port,
               "(printf 'PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n"
               "\\000\\000\\000\\004\\000\\000\\000\\000\\000'; sleep 4)",
               "-alpn h2 -ign_eof", &status);
  pthread_join(th, NULL);
  print_outcome("graceful close", out, status);
  assert_int_not_equal(status, 124); /* the server closed, no timeout */
  if (!contains_ci(out, "ALPN protocol: h2"))
    fail_msg("handshake failed:\n%s", out);
  if (!strstr(out, "shutdown")) /* the GOAWAY's debug data */
    fail_msg("no GOAWAY seen:\n%s", out);
  if (contains_ci(out, "unexpected eof"))
    fail_msg("closed without close_notify:\n%s", out);
  free(out);
  srv_free(s);
}

/* A handshake that offers ALPN alpn_args (none, or without h2) must be
 * refused with a no_application_protocol alert (-ign_eof keeps s_client
 * reading; only the 10 s timeout would end a connection left open). */
static void check_alpn_refused(tls_srv *s, const char *label,
                               const char *alpn_args) {
  char extra[128];
  snprintf(extra, sizeof extra, "-ign_eof %s", alpn_args);
  int status;
  char *out = s_client(s->port, NULL, extra, &status);
  print_outcome(label, out, status);
  if (status == 124)
    fail_msg("%s: connection still open after 10 s:\n%s", label, out);
  assert_false(contains_ci(out, "ALPN protocol: h2"));
  assert_false(contains_ci(out, "ALPN protocol: http/1.1"));
  if (!contains_ci(out, "no application protocol"))
    fail_msg("%s: unexpected outcome:\n%s", label, out);
  free(out);
}

static void test_alpn_required(void **state) {
  (void)state;
  tls_srv *s = tls_server("server.pem", "server.key", NULL, 0);
  check_alpn_refused(s, "ALPN http/1.1", "-alpn http/1.1");
  assert_tls_healthy(s);
  check_alpn_refused(s, "no ALPN", "");
  assert_tls_healthy(s);
  /* h2 among others is fine: the handshake completes with h2. */
  int status;
  char *out = s_client(s->port, NULL, "-alpn http/1.1,h2", &status);
  if (!contains_ci(out, "ALPN protocol: h2"))
    fail_msg("ALPN http/1.1,h2: h2 not selected:\n%s", out);
  free(out);
  assert_int_equal(atomic_load(&s->calls), 2); /* the two healthy checks */
  srv_free(s);
}

/* ---- 8. configuration errors */

static void test_config_errors(void **state) {
  (void)state;
  sluice_channel_opts *co = NULL;
  assert_int_equal(sluice_channel_opts_new(&co), 0);
  assert_string_equal(sluice_channel_opts_last_error(co), "");
  sluice_tls_client_config cc;

  /* NULLs. */
  sluice_tls_client_config_init(&cc);
  assert_int_equal(sluice_channel_opts_set_tls(NULL, &cc),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_tls(co, NULL),
                   SLUICE_ERR_INVALID_ARG);

  /* A CA file that is not there: the error names it. */
  sluice_tls_client_config_init(&cc);
  cc.ca.file = cert("missing-ca.pem");
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), SLUICE_ERR_TLS);
  const char *err = sluice_channel_opts_last_error(co);
  print_message("missing CA file: \"%s\"\n", err);
  assert_non_null(err);
  assert_true(err[0] != '\0');
  if (strstr(err, "missing-ca.pem") == NULL)
    fail_msg("error \"%s\" does not name the file", err);

  /* Garbage PEM in memory. */
  static const char garbage[] = "-----BEGIN CERTIFICATE-----\nnot base64 at "
                                "all!\n-----END CERTIFICATE-----\n";
  sluice_tls_client_config_init(&cc);
  cc.ca.data = garbage;
  cc.ca.len = sizeof garbage - 1;
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), SLUICE_ERR_TLS);
  print_message("garbage CA PEM: \"%s\"\n", sluice_channel_opts_last_error(co));
  assert_true(sluice_channel_opts_last_error(co)[0] != '\0');
  static const char nothing_pem[] = "hello, I am not PEM";
  cc.ca.data = nothing_pem;
  cc.ca.len = sizeof nothing_pem - 1;
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), SLUICE_ERR_TLS);
  print_message("non-PEM CA: \"%s\"\n", sluice_channel_opts_last_error(co));

  /* Client certificate without key. */
  sluice_tls_client_config_init(&cc);
  cc.ca.file = cert("ca.pem");
  cc.cert.file = cert("client.pem");
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc),
                   SLUICE_ERR_INVALID_ARG);
  /* Client key not matching its certificate. */
  cc.key.file = cert("server.key");
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), SLUICE_ERR_TLS);
  print_message("client key mismatch: \"%s\"\n",
                sluice_channel_opts_last_error(co));
  assert_true(sluice_channel_opts_last_error(co)[0] != '\0');
  /* And a good configuration is still accepted afterwards. */
  cc.key.file = cert("client.key");
  assert_int_equal(sluice_channel_opts_set_tls(co, &cc), 0);
  sluice_channel_opts_del(co);

  /* Server side. */
  sluice_server_opts *so = NULL;
  assert_int_equal(sluice_server_opts_new(&so), 0);
  assert_string_equal(sluice_server_opts_last_error(so), "");
  sluice_tls_server_config sc;
  sluice_tls_server_config_init(&sc);
  assert_int_equal(sluice_server_opts_set_tls(NULL, &sc),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_server_opts_set_tls(so, NULL),
                   SLUICE_ERR_INVALID_ARG);
  /* Nothing given: a server needs a certificate and key. */
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), SLUICE_ERR_INVALID_ARG);

  /* Certificate without key. */
  sc.cert.file = cert("server.pem");
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), SLUICE_ERR_INVALID_ARG);
  /* Key without certificate. */
  sluice_tls_server_config_init(&sc);
  sc.key.file = cert("server.key");
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), SLUICE_ERR_INVALID_ARG);

  /* Key not matching the certificate. */
  sluice_tls_server_config_init(&sc);
  sc.cert.file = cert("server.pem");
  sc.key.file = cert("client.key");
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), SLUICE_ERR_TLS);
  print_message("server key mismatch: \"%s\"\n",
                sluice_server_opts_last_error(so));
  assert_true(sluice_server_opts_last_error(so)[0] != '\0');

  /* Missing certificate file. */
  sc.cert.file = cert("missing-server.pem");
  sc.key.file = cert("server.key");
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), SLUICE_ERR_TLS);
  err = sluice_server_opts_last_error(so);
  print_message("missing server cert: \"%s\"\n", err);
  if (strstr(err, "missing-server.pem") == NULL)
    fail_msg("error \"%s\" does not name the file", err);

  /* Garbage PEM in memory. */
  sluice_tls_server_config_init(&sc);
  sc.cert.data = garbage;
  sc.cert.len = sizeof garbage - 1;
  sc.key.file = cert("server.key");
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), SLUICE_ERR_TLS);
  print_message("garbage server PEM: \"%s\"\n",
                sluice_server_opts_last_error(so));
  assert_true(sluice_server_opts_last_error(so)[0] != '\0');

  /* REQUIRE without client CAs. */
  sluice_tls_server_config_init(&sc);
  sc.cert.file = cert("server.pem");
  sc.key.file = cert("server.key");
  sc.client_cert = SLUICE_CLIENT_CERT_REQUIRE;
  int rc = sluice_server_opts_set_tls(so, &sc);
  print_message("REQUIRE without client_ca: %s\n", sluice_strerror(rc));
  assert_true(rc == SLUICE_ERR_INVALID_ARG || rc == SLUICE_ERR_TLS);

  /* A good configuration is still accepted. */
  sc.client_ca.file = cert("ca.pem");
  assert_int_equal(sluice_server_opts_set_tls(so, &sc), 0);
  sluice_server_opts_del(so);
}

static int rm_dir(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd);
}

int main(void) {
  e2e_init();
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/sluice-tls-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(g_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "sh '%s' '%s'", SLUICE_GEN_CERTS, g_dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "%s failed\n", cmd);
    rm_dir();
    return 1;
  }

  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tls_ok),
      cmocka_unit_test(test_pem_in_memory),
      cmocka_unit_test(test_mtls),
      cmocka_unit_test(test_wrong_ca),
      cmocka_unit_test(test_expired),
      cmocka_unit_test(test_wrong_host),
      cmocka_unit_test(test_client_cert_required),
      cmocka_unit_test(test_plaintext_mismatch),
      cmocka_unit_test(test_concurrent_handshakes),
      cmocka_unit_test(test_fixture_over_tls),
      cmocka_unit_test(test_renegotiation_refused),
      cmocka_unit_test(test_alpn_required),
      cmocka_unit_test(test_close_notify),
      cmocka_unit_test(test_config_errors),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rm_dir();
  return rc;
}
