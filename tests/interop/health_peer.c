/* health_peer: the sluice side of test_health_peers.py, driven line by line
 * on stdin (answers on stdout, one line each).
 *
 *   health_peer server [--no-health]
 *     helloworld.Greeter ("Hello <name>") with the library's health service;
 *     prints "listening on <port>". Commands:
 *       set NAME SERVING|NOT_SERVING  (NAME "-" is "")  -> "ok" / "error ..."
 *       shutdown  -> sluice_server_shutdown (grace 5 s), then "shut down"
 *
 *   health_peer client --target T [--lb rr|lcc|bcc|btc] [--health NAME]
 *     a channel with client-side health checking of NAME ("-" is ""), or the
 *     service config in $HEALTH_SERVICE_CONFIG when set. Prints "ready".
 *     Commands:
 *       call N   -> N blocking SayHello calls (10 s deadline each), one line
 *                   each: "OK <reply>" or "<CODE> <message>"
 *       wait DEST STATE -> "ok" once the channel reports DEST (host:port) in
 *                   health STATE (sluice_client_health), "timeout" after 10 s
 *       drops    -> the not_serving drop counter
 *       quit
 *
 * Every wait is bounded; EOF on stdin ends the program (after a shutdown,
 * for the server). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "helloworld.sluice.h"

static void say_hello(sluice_server_call *call,
                      const Helloworld__HelloRequest *req, void *ud) {
  (void)ud;
  char text[300];
  snprintf(text, sizeof text, "Hello %s", req->name ? req->name : "");
  Helloworld__HelloReply r = HELLOWORLD__HELLO_REPLY__INIT;
  r.message = text;
  helloworld__greeter__say_hello__reply(call, &r);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int run_server(int health) {
  sluice_server_opts *o = NULL;
  sluice_server *srv = NULL;
  int port = 0;
  const Helloworld__Greeter_SluiceHandlers h = {.say_hello = say_hello};
  if (sluice_server_opts_new(&o) != 0 ||
      sluice_server_opts_set_threads(o, 1) != 0 ||
      sluice_server_opts_set_health(o, health) != 0 ||
      sluice_server_new(&srv, o) != 0 ||
      helloworld__greeter__sluice_register(srv, &h, NULL) != 0 ||
      sluice_server_listen(srv, "127.0.0.1:0", &port) != 0 ||
      sluice_server_start(srv) != 0) {
    fprintf(stderr, "health_peer: cannot start the server\n");
    return 1;
  }
  sluice_server_opts_del(o);
  printf("listening on %d\n", port);
  fflush(stdout);
  char line[512];
  while (fgets(line, sizeof line, stdin)) {
    char name[256], status[32];
    if (sscanf(line, "set %255s %31s", name, status) == 2) {
      sluice_serving_status st =
          strcmp(status, "SERVING") == 0 ? SLUICE_SERVING : SLUICE_NOT_SERVING;
      int rv = sluice_server_set_serving_status(
          srv, strcmp(name, "-") == 0 ? "" : name, st);
      if (rv == 0)
        printf("ok\n");
      else
        printf("error %s\n", sluice_strerror(rv));
    } else if (strncmp(line, "shutdown", 8) == 0) {
      sluice_server_shutdown(srv, 5000);
      printf("shut down\n");
    } else {
      printf("error unknown command\n");
    }
    fflush(stdout);
  }
  sluice_server_del(srv);
  return 0;
}

static int prom_has(sluice_channel *ch, const char *needle) {
  char *text = NULL;
  if (sluice_channel_stats_prometheus(ch, &text) != 0)
    return 0;
  int has = strstr(text, needle) != NULL;
  free(text);
  return has;
}

static int run_client(const char *target, const char *lb, const char *health) {
  sluice_channel_opts *o = NULL;
  sluice_channel *ch = NULL;
  const char *sc = getenv("HEALTH_SERVICE_CONFIG");
  if (sluice_channel_opts_new(&o) != 0 || sluice_channel_opts_set_lb(o, lb) ||
      (health && sluice_channel_opts_set_health_check(
                     o, strcmp(health, "-") == 0 ? "" : health) != 0) ||
      (sc && sluice_channel_opts_set_service_config(o, sc) != 0) ||
      sluice_channel_new(&ch, target, o) != 0) {
    fprintf(stderr, "health_peer: cannot create the channel: %s\n",
            o ? sluice_channel_opts_last_error(o) : "");
    return 1;
  }
  sluice_channel_opts_del(o);
  printf("ready\n");
  fflush(stdout);
  char line[512];
  while (fgets(line, sizeof line, stdin)) {
    int n;
    char dest[128], state[64];
    if (sscanf(line, "call %d", &n) == 1) {
      for (int i = 0; i < n; i++) {
        Helloworld__HelloRequest req = HELLOWORLD__HELLO_REQUEST__INIT;
        req.name = "health";
        Helloworld__HelloReply *resp = NULL;
        sluice_call_opts co;
        sluice_call_opts_init(&co);
        co.timeout_ms = 10000;
        sluice_status st;
        sluice_status_init(&st);
        sluice_status_code code =
            helloworld__greeter__say_hello__blocking(ch, &req, &resp, &co, &st);
        if (code == SLUICE_STATUS_OK)
          printf("OK %s\n", resp->message);
        else
          printf("%s %s\n", sluice_status_name(code),
                 st.message ? st.message : "");
        if (resp)
          protobuf_c_message_free_unpacked(&resp->base, NULL);
        sluice_status_clear(&st);
      }
    } else if (sscanf(line, "wait %127s %63s", dest, state) == 2) {
      char needle[256];
      snprintf(needle, sizeof needle,
               "sluice_client_health{dest=\"%s\",health=\"%s\"}", dest, state);
      uint64_t end = now_ms() + 10000;
      while (!prom_has(ch, needle) && now_ms() < end)
        sleep_ms(5);
      printf("%s\n", prom_has(ch, needle) ? "ok" : "timeout");
    } else if (strncmp(line, "drops", 5) == 0) {
      char *text = NULL;
      const char *p = NULL;
      if (sluice_channel_stats_prometheus(ch, &text) == 0)
        p = strstr(text, "reason=\"not_serving\"} ");
      printf("%llu\n",
             p ? strtoull(p + strlen("reason=\"not_serving\"} "), NULL, 10)
               : 0ull);
      free(text);
    } else if (strncmp(line, "quit", 4) == 0) {
      break;
    } else {
      printf("error unknown command\n");
    }
    fflush(stdout);
  }
  fflush(stdout);
  sluice_channel_del(ch);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "server") == 0)
    return run_server(!(argc >= 3 && strcmp(argv[2], "--no-health") == 0));
  if (argc >= 2 && strcmp(argv[1], "client") == 0) {
    const char *target = NULL, *lb = "rr", *health = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
      if (strcmp(argv[i], "--target") == 0)
        target = argv[i + 1];
      else if (strcmp(argv[i], "--lb") == 0)
        lb = argv[i + 1];
      else if (strcmp(argv[i], "--health") == 0)
        health = argv[i + 1];
    }
    if (target)
      return run_client(target, lb, health);
  }
  fprintf(stderr, "usage: health_peer server [--no-health] | client --target "
                  "T [--lb LB] [--health NAME]\n");
  return 2;
}
