/* abuse_server: the sluice server under attack in test_abuse.py.
 *
 *   abuse_server [--nofile N] [--max-connections N] [--handshake-timeout MS]
 *                [--max-header-list N]
 *
 * Serves helloworld.Greeter ("Hello <name>") on 127.0.0.1 with one loop and
 * prints "listening on <port>". --nofile lowers RLIMIT_NOFILE first (the
 * EMFILE test). Commands on stdin, one answer line each:
 *   stats -> "accepted=A paused=P refused=R handshake=H calm=C pings=G"
 * EOF shuts the server down (grace 1 s) and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sluice/sluice.h>

#include "helloworld.sluice.h"

static void say_hello(sluice_server_call *call,
                      const Helloworld__HelloRequest *req, void *ud) {
  (void)ud;
  char text[300];
  snprintf(text, sizeof text, "Hello %.200s", req->name ? req->name : "");
  Helloworld__HelloReply r = HELLOWORLD__HELLO_REPLY__INIT;
  r.message = text;
  helloworld__greeter__say_hello__reply(call, &r);
}

int main(int argc, char **argv) {
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
