/* e2e: peers that vanish mid-call must not kill a program that leaves
 * SIGPIPE at its default (as the README's server and client do). The
 * program is tests/e2e/sigpipe_peer.c, run as a child with SIGPIPE reset
 * to SIG_DFL and unblocked (it checks both before it starts):
 *  - as a server streaming a large response, facing raw clients that
 *    drop the connection after reading part of it (RST with SO_LINGER 0,
 *    FIN then RST, plain close, close after draining); it must survive
 *    every one and still answer a call afterwards;
 *  - as a client sending a large request to a fake server that opens the
 *    flow-control windows, reads part of it and drops the connection the
 *    same ways; every call must end with an error, the client alive.
 * Without the library's guard the child dies of SIGPIPE within a few
 * rounds. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_common.h"
#include "stream.pb-c.h"

#define ROUNDS 12 /* of each way to vanish */

/* ---- the child */

typedef struct child {
  pid_t pid;
  int to;     /* its stdin */
  FILE *from; /* its stdout */
  int reaped, status;
} child;

static void spawn(child *c, char *const argv[]) {
  int in[2], out[2];
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  c->reaped = 0;
  c->pid = fork();
  assert_true(c->pid >= 0);
  if (c->pid == 0) {
    /* The test itself ignores SIGPIPE (e2e_init) and an ignored signal
     * stays ignored across exec: give the program the default back. */
    signal(SIGPIPE, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    execv(SLUICE_SIGPIPE_PEER, argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c->to = in[1];
  c->from = fdopen(out[0], "r");
  assert_non_null(c->from);
}

static int alive(child *c) {
  if (!c->reaped && waitpid(c->pid, &c->status, WNOHANG) == c->pid)
    c->reaped = 1;
  return !c->reaped;
}

/* Waits for the child's exit; fails the test unless it exited 0. */
static void reap(child *c) {
  for (int i = 0; i < (int)E2E_HANG_MS / 10 && alive(c); i++)
    e2e_sleep_ms(10);
  if (!c->reaped) {
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &c->status, 0);
    fail_msg("sigpipe_peer did not exit");
  }
  int st = c->status;
  if (WIFSIGNALED(st))
    fail_msg("sigpipe_peer died of signal %d%s", WTERMSIG(st),
             WTERMSIG(st) == SIGPIPE ? " (SIGPIPE)" : "");
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  fclose(c->from);
  if (c->to >= 0)
    close(c->to);
}

/* ---- raw sockets */

static void set_timeouts(int fd) {
  struct timeval tv = {5, 0}; /* only to catch hangs */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A blocking socket connected to the child, or -1 (it is gone). */
static int connect_raw(int port) { return e2e_connect_loopback(port); }

static void send_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0)
      return; /* the peer went away: nothing to assert here */
    p += w;
    n -= (size_t)w;
  }
}

/* Reads up to n bytes (less if the peer stops). */
static size_t recv_some(int fd, size_t n) {
  static uint8_t buf[65536];
  size_t got = 0;
  while (got < n) {
    size_t want = n - got < sizeof buf ? n - got : sizeof buf;
    ssize_t r = recv(fd, buf, want, 0);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  return got;
}

/* The ways a peer vanishes with the other side mid-write. */
enum { VANISH_RST, VANISH_FIN_RST, VANISH_CLOSE, VANISH_DRAINED, VANISH_N };

static void vanish(int fd, int how) {
  switch (how) {
  case VANISH_RST: {
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    break;
  }
  case VANISH_FIN_RST: /* FIN now, RST for the unread data at close */
    shutdown(fd, SHUT_WR);
    e2e_sleep_ms(1);
    break;
  case VANISH_DRAINED: { /* nothing unread: a FIN, then RSTs to more data */
    uint8_t buf[65536];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
      ;
    break;
  }
  default:
    break;
  }
  close(fd);
}

/* ---- a Download request, as bytes */

typedef struct bytes {
  uint8_t *p;
  size_t n;
} bytes;

/* A Download of count chunks of size bytes on a new connection that grants
 * 1 GiB windows: the server may send all of it without waiting for us. */
static bytes download_request(uint32_t count, uint32_t size) {
  Streamt__DownloadReq req = STREAMT__DOWNLOAD_REQ__INIT;
  req.count = count;
  req.size = size;
  uint8_t msg[32];
  size_t ml = streamt__download_req__pack(&req, msg);
  bytes b;
  b.n = e2e_raw_call_bytes("/streamt.Streams/Download", NULL, msg, ml, 1,
                           1u << 30, &b.p);
  return b;
}

/* ---- the server survives clients that vanish mid-response */

static int read_port(child *c) {
  char line[64];
  int port = 0;
  assert_non_null(fgets(line, sizeof line, c->from));
  assert_int_equal(sscanf(line, "port %d", &port), 1);
  return port;
}

/* One e2e.Echo call through sluice. */
static void assert_answers(int port) {
  sluice_channel *ch = e2e_channel_port(port, NULL);
  E2e__EchoMsg req = E2E__ECHO_MSG__INIT, *resp = NULL;
  req.text = "still serving";
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = E2E_HANG_MS;
  sluice_status st;
  sluice_status_init(&st);
  assert_int_equal(e2e__echo__echo__blocking(ch, &req, &resp, &opts, &st),
                   SLUICE_STATUS_OK);
  assert_string_equal(resp->text, "still serving");
  protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&st);
  sluice_channel_del(ch);
}

static void test_server_survives_vanishing_clients(void **state) {
  (void)state;
  char *argv[] = {"sigpipe_peer", "server", NULL};
  child c;
  spawn(&c, argv);
  int port = read_port(&c);
  bytes req = download_request(1000, 64 * 1024); /* 64 MiB */
  for (int round = 0; round < ROUNDS && alive(&c); round++) {
    for (int how = 0; how < VANISH_N; how++) {
      /* Two at once, so a drop often lands while the server is writing
       * the other one's response too. */
      int a = connect_raw(port), b = connect_raw(port);
      if (a < 0 || b < 0) {
        if (a >= 0)
          close(a);
        if (b >= 0)
          close(b);
        break;
      }
      send_all(a, req.p, req.n);
      send_all(b, req.p, req.n);
      recv_some(a, 256 * 1024);
      recv_some(b, 64 * 1024 * (size_t)(1 + round % 8));
      vanish(a, how);
      e2e_sleep_ms((unsigned)(round % 3));
      vanish(b, (how + round) % VANISH_N);
    }
  }
  free(req.p);
  e2e_sleep_ms(50);
  if (alive(&c))
    assert_answers(port);
  close(c.to); /* the program shuts down at EOF */
  c.to = -1;
  reap(&c);
}

/* ---- the client survives a server that vanishes mid-request */

static int listen_raw(int *port) { return e2e_bind_loopback(port, 16); }

/* Our SETTINGS (1 GiB stream window) and a connection WINDOW_UPDATE to
 * 1 GiB: the client may send its whole request at once. */
static const uint8_t open_windows[] = {
    0,    0,    6,    4, 0, 0, 0, 0, 0, /* SETTINGS, 6 bytes */
    0,    4,    0x40, 0, 0, 0,          /* INITIAL_WINDOW_SIZE = 1 GiB */
    0,    0,    4,    8, 0, 0, 0, 0, 0, /* WINDOW_UPDATE, stream 0 */
    0x3f, 0xff, 0,    0,                /* + 1 GiB - 64 KiB */
};

static void test_client_survives_vanishing_server(void **state) {
  (void)state;
  int port;
  int lfd = listen_raw(&port);
  char ps[16], ns[16];
  int n = ROUNDS * VANISH_N;
  snprintf(ps, sizeof ps, "%d", port);
  snprintf(ns, sizeof ns, "%d", n);
  char *argv[] = {"sigpipe_peer", "client", ps, ns, NULL};
  child c;
  spawn(&c, argv);
  int served = 0;
  for (int i = 0; i < n && alive(&c); i++) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, (int)E2E_HANG_MS) != 1)
      break;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
      break;
    set_timeouts(fd);
    send_all(fd, open_windows, sizeof open_windows);
    recv_some(fd, 128 * 1024 * (size_t)(1 + i % 8));
    vanish(fd, i % VANISH_N);
    served++;
  }
  close(lfd);
  char line[64];
  int failed = -1;
  if (fgets(line, sizeof line, c.from) == NULL ||
      sscanf(line, "failed %d", &failed) != 1)
    failed = -1;
  reap(&c);
  assert_int_equal(served, n);
  assert_int_equal(failed, n);
}

int main(void) {
  e2e_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_server_survives_vanishing_clients),
      cmocka_unit_test(test_client_survives_vanishing_server),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
