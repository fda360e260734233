/* The program side of test_sigpipe.c: a sluice server or client written the
 * way the README shows, which never touches its signal dispositions. It
 * first checks that SIGPIPE is at SIG_DFL and not blocked (exit 3 if not),
 * so a write to a socket its peer has dropped would kill it with SIGPIPE
 * unless the library guards every write itself.
 *
 *   sigpipe_peer server
 *     serves streamt.Streams/Download (count chunks of size bytes, as fast
 *     as flow control allows) and e2e.Echo on 127.0.0.1:0; prints
 *     "port N" and serves until stdin closes; exits 0 after shutdown.
 *   sigpipe_peer client PORT N
 *     makes N unary e2e.Echo/Echo calls with a 4 MiB request, each on a new
 *     channel to 127.0.0.1:PORT (the test's fake server drops every
 *     connection mid-request); prints "failed K" and exits 0 once every
 *     call has ended (with an error status). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

#include "e2e.sluice.h"
#include "stream.sluice.h"

static int sigpipe_is_default(void) {
  struct sigaction sa;
  sigset_t mask;
  if (sigaction(SIGPIPE, NULL, &sa) != 0 ||
      sigprocmask(SIG_BLOCK, NULL, &mask) != 0)
    return 0;
  return sa.sa_handler == SIG_DFL && !sigismember(&mask, SIGPIPE);
}

/* ---- server */

typedef struct download {
  sluice_server_call *call;
  uint32_t next, count;
  uint8_t *payload;
  size_t size;
  int finished;
} download;

static void pump(download *d) {
  while (d->next < d->count) {
    Streamt__Chunk c = STREAMT__CHUNK__INIT;
    c.seq = d->next;
    c.payload.data = d->payload;
    c.payload.len = d->size;
    if (sluice_server_call_send(d->call, &c.base) != 0)
      return; /* FULL: on_send_ready continues; else on_done follows */
    d->next++;
  }
  if (!d->finished) {
    d->finished = 1;
    sluice_server_call_finish(d->call, SLUICE_STATUS_OK, NULL, NULL);
  }
}

static void on_ready(sluice_server_call *call, void *ud) {
  (void)call;
  pump(ud);
}

static void on_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)cancelled;
  download *d = ud;
  if (!d->finished)
    sluice_server_call_finish(call, SLUICE_STATUS_CANCELLED, NULL, NULL);
  free(d->payload);
  free(d);
}

static void on_download(sluice_server_call *call,
                        const Streamt__DownloadReq *req, void *ud) {
  (void)ud;
  download *d = calloc(1, sizeof *d);
  if (d)
    d->payload = calloc(1, req->size ? req->size : 1);
  if (!d || !d->payload) {
    free(d);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED, "oom",
                              NULL);
    return;
  }
  d->call = call;
  d->count = req->count;
  d->size = req->size;
  sluice_server_call_handlers h = {NULL, NULL, on_ready, on_done};
  sluice_server_call_set_handlers(call, &h, d);
  pump(d);
}

static void on_echo(sluice_server_call *call, const E2e__EchoMsg *req,
                    void *ud) {
  (void)ud;
  E2e__EchoMsg out = E2E__ECHO_MSG__INIT;
  out.text = req->text;
  sluice_server_call_reply(call, &out.base);
}

static int run_server(void) {
  sluice_server *srv;
  int port = 0;
  Streamt__Streams_SluiceHandlers sh = {.download = on_download};
  E2e__Echo_SluiceHandlers eh = {.echo = on_echo, .big = on_echo};
  if (sluice_server_new(&srv, NULL) != 0 ||
      streamt__streams__sluice_register(srv, &sh, NULL) != 0 ||
      e2e__echo__sluice_register(srv, &eh, NULL) != 0 ||
      sluice_server_listen(srv, "127.0.0.1:0", &port) != 0 ||
      sluice_server_start(srv) != 0) {
    fprintf(stderr, "sigpipe_peer: cannot start the server\n");
    return 1;
  }
  printf("port %d\n", port);
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin) != NULL)
    ;
  sluice_server_shutdown(srv, 0);
  sluice_server_del(srv);
  return 0;
}

/* ---- client */

static int run_client(const char *port, int n) {
  char target[64];
  snprintf(target, sizeof target, "ipv4:127.0.0.1:%s", port);
  size_t len = 4u << 20;
  uint8_t *payload = calloc(1, len);
  if (!payload)
    return 1;
  int failed = 0;
  for (int i = 0; i < n; i++) {
    sluice_channel *ch;
    if (sluice_channel_new(&ch, target, NULL) != 0) {
      free(payload);
      return 1;
    }
    E2e__EchoMsg req = E2E__ECHO_MSG__INIT, *resp = NULL;
    req.payload.data = payload;
    req.payload.len = len;
    sluice_call_opts opts;
    sluice_call_opts_init(&opts);
    opts.timeout_ms = 10000;
    sluice_status st;
    sluice_status_init(&st);
    if (e2e__echo__echo__blocking(ch, &req, &resp, &opts, &st) !=
        SLUICE_STATUS_OK)
      failed++;
    else
      protobuf_c_message_free_unpacked(&resp->base, NULL);
    sluice_status_clear(&st);
    sluice_channel_del(ch);
  }
  free(payload);
  printf("failed %d\n", failed);
  return 0;
}

int main(int argc, char **argv) {
  if (!sigpipe_is_default()) {
    fprintf(stderr, "sigpipe_peer: SIGPIPE is not at SIG_DFL/unblocked\n");
    return 3;
  }
  if (argc == 2 && strcmp(argv[1], "server") == 0)
    return run_server();
  if (argc == 4 && strcmp(argv[1], "client") == 0)
    return run_client(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: sigpipe_peer server | client PORT N\n");
  return 2;
}
