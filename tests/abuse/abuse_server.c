/* abuse_server: the sluice server under attack in test_abuse.py.
 *
 *   abuse_server [--nofile N] [--max-connections N] [--handshake-timeout MS]
 *                [--max-header-list N] [--tls CERTDIR]
 *   abuse_server --call TARGET --md-bytes N [--max-header-list N]
 *
 * Serves helloworld.Greeter ("Hello <name>"; the names "big-initial" and
 * "big-trailers" add 20 KB of initial or trailing metadata) on 127.0.0.1 with
 * one loop and prints "listening on <port>". --nofile lowers RLIMIT_NOFILE
 * first (the EMFILE test). Commands on stdin, one answer line each: stats ->
 * "accepted=A paused=P refused=R handshake=H calm=C pings=G" EOF shuts the
 * server down (grace 1 s) and exits.
 *
 * --call: one SayHello to TARGET (10 s deadline) with an "x-big" metadata
 * value of N bytes, after a first small call (so the server's SETTINGS
 * are known); prints "<CODE> <message>" of the second call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sluice/sluice.h>

#include "helloworld.sluice.h"

static void say_hello(sluice_server_call *call,
                      const Helloworld__HelloRequest *req, void *ud) {
  (void)ud;
  /* "big-initial" / "big-trailers": 20 KB of response metadata, over the
   * client's header list limit (abuse.header_list) */
  static char big[20001];
  if (!big[0])
    memset(big, 'b', sizeof big - 1);
  if (req->name && strcmp(req->name, "big-initial") == 0)
    sluice_server_call_add_initial_metadata(call, "x-big", big, sizeof big - 1);
  if (req->name && strcmp(req->name, "big-trailers") == 0)
    sluice_server_call_add_trailing_metadata(call, "x-big", big,
                                             sizeof big - 1);
  char text[300];
  snprintf(text, sizeof text, "Hello %.200s", req->name ? req->name : "");
  Helloworld__HelloReply r = HELLOWORLD__HELLO_REPLY__INIT;
  r.message = text;
  helloworld__greeter__say_hello__reply(call, &r);
}

static int call_once(sluice_channel *ch, size_t md_bytes,
                     sluice_status_code *code_out, char *text, size_t cap) {
  sluice_metadata *md = NULL;
  char *big = NULL;
  if (md_bytes) {
    big = malloc(md_bytes + 1);
    if (!big || sluice_metadata_new(&md) != 0)
      return -1;
    memset(big, 'b', md_bytes);
    big[md_bytes] = 0;
    if (sluice_metadata_add_str(md, "x-big", big) != 0)
      return -1;
  }
  Helloworld__HelloRequest req = HELLOWORLD__HELLO_REQUEST__INIT;
  req.name = "big";
  Helloworld__HelloReply *resp = NULL;
  sluice_call_opts co;
  sluice_call_opts_init(&co);
  co.timeout_ms = 10000;
  co.metadata = md;
  sluice_status st;
  sluice_status_init(&st);
  *code_out =
      helloworld__greeter__say_hello__blocking(ch, &req, &resp, &co, &st);
  snprintf(text, cap, "%s", st.message ? st.message : "");
  if (resp)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  sluice_metadata_del(md);
  free(big);
  return 0;
}

static int run_client(const char *target, size_t md_bytes, uint32_t max_hl) {
  sluice_channel_opts *o = NULL;
  sluice_channel *ch = NULL;
  if (sluice_channel_opts_new(&o) != 0 ||
      (max_hl && sluice_channel_opts_set_max_header_list_size(o, max_hl)) ||
      sluice_channel_new(&ch, target, o) != 0) {
    fprintf(stderr, "abuse_server: cannot create the channel\n");
    return 1;
  }
  sluice_channel_opts_del(o);
  sluice_status_code code;
  char text[512];
  /* a small call first: the connection and its SETTINGS */
  if (call_once(ch, 0, &code, text, sizeof text) != 0 ||
      call_once(ch, md_bytes, &code, text, sizeof text) != 0) {
    fprintf(stderr, "abuse_server: out of memory\n");
    return 1;
  }
  printf("%s %s\n", sluice_status_name(code), text);
  sluice_channel_del(ch);
  return 0;
}

int main(int argc, char **argv) {
  const char *call_target = NULL;
  size_t md_bytes = 0;
  uint32_t max_hl = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--call") == 0)
      call_target = argv[i + 1];
    else if (strcmp(argv[i], "--md-bytes") == 0)
      md_bytes = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--max-header-list") == 0)
      max_hl = (uint32_t)strtoul(argv[i + 1], NULL, 10);
  }
  if (call_target)
    return run_client(call_target, md_bytes, max_hl);
  sluice_server_opts *o = NULL;
  sluice_server *srv = NULL;
  int port = 0;
  if (sluice_server_opts_new(&o) != 0 ||
      sluice_server_opts_set_threads(o, 1) != 0)
    return 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *f = argv[i];
    unsigned long long v = strtoull(argv[i + 1], NULL, 10);
    int rv = 0;
    if (strcmp(f, "--nofile") == 0) {
      struct rlimit rl;
      getrlimit(RLIMIT_NOFILE, &rl);
      rl.rlim_cur = (rlim_t)v;
      rv = setrlimit(RLIMIT_NOFILE, &rl);
    } else if (strcmp(f, "--max-connections") == 0) {
      rv = sluice_server_opts_set_max_connections(o, (uint32_t)v);
    } else if (strcmp(f, "--handshake-timeout") == 0) {
      rv = sluice_server_opts_set_handshake_timeout(o, v);
    } else if (strcmp(f, "--tls") == 0) { /* DIR: server.pem, server.key */
      static char cert[1024], key[1024];
      snprintf(cert, sizeof cert, "%s/server.pem", argv[i + 1]);
      snprintf(key, sizeof key, "%s/server.key", argv[i + 1]);
      sluice_tls_server_config tc;
      sluice_tls_server_config_init(&tc);
      tc.cert.file = cert;
      tc.key.file = key;
      rv = sluice_server_opts_set_tls(o, &tc);
    } else if (strcmp(f, "--max-header-list") == 0) {
      rv = sluice_server_opts_set_max_header_list_size(o, (uint32_t)v);
    } else {
      fprintf(stderr, "abuse_server: unknown flag %s\n", f);
      return 2;
    }
    if (rv != 0) {
      fprintf(stderr, "abuse_server: cannot set %s\n", f);
      return 2;
    }
  }
  const Helloworld__Greeter_SluiceHandlers h = {.say_hello = say_hello};
  if (sluice_server_new(&srv, o) != 0 ||
      helloworld__greeter__sluice_register(srv, &h, NULL) != 0 ||
      sluice_server_listen(srv, "127.0.0.1:0", &port) != 0 ||
      sluice_server_start(srv) != 0) {
    fprintf(stderr, "abuse_server: cannot start the server\n");
    return 1;
  }
  sluice_server_opts_del(o);
  printf("listening on %d\n", port);
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "stats", 5) == 0) {
      printf("accepted=%llu paused=%llu refused=%llu handshake=%llu "
             "calm=%llu pings=%llu\n",
             (unsigned long long)sluice_server_conn_events(
                 srv, SLUICE_SERVER_CONNECTIONS_ACCEPTED),
             (unsigned long long)sluice_server_conn_events(
                 srv, SLUICE_SERVER_ACCEPT_PAUSED),
             (unsigned long long)sluice_server_conn_events(
                 srv, SLUICE_SERVER_CONNECTIONS_REFUSED),
             (unsigned long long)sluice_server_conn_events(
                 srv, SLUICE_SERVER_HANDSHAKE_TIMEOUTS),
             (unsigned long long)sluice_server_conn_events(
                 srv, SLUICE_SERVER_GOAWAY_CALM),
             (unsigned long long)sluice_server_conn_events(
                 srv, SLUICE_SERVER_GOAWAY_TOO_MANY_PINGS));
    } else {
      printf("error unknown command\n");
    }
    fflush(stdout);
  }
  sluice_server_shutdown(srv, 1000);
  sluice_server_del(srv);
  return 0;
}
