#include "serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sluice_example_block_signals(sigset_t *stop_signals) {
  sigemptyset(stop_signals);
  sigaddset(stop_signals, SIGINT);
  sigaddset(stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, stop_signals, NULL);
}

int sluice_example_address(char *out, size_t cap, const char *host,
                           unsigned long port, const char *prog) {
  int bracket = strchr(host, ':') != NULL && host[0] != '[';
  int n = snprintf(out, cap, "%s%s%s:%lu", bracket ? "[" : "", host,
                   bracket ? "]" : "", port);
  if (n < 0 || (size_t)n >= cap) {
    fprintf(stderr, "%s: host name too long\n", prog);
    return -1;
  }
  return 0;
}

int sluice_example_serve(sluice_server *srv, const char *address,
                         const sigset_t *stop_signals, uint64_t grace_ms,
                         const char *prog) {
  int rc, bound_port = 0;
  if ((rc = sluice_server_listen(srv, address, &bound_port)) != 0) {
    fprintf(stderr, "%s: cannot listen on %s: %s\n", prog, address,
            sluice_strerror(rc));
    return 1;
  }
  if ((rc = sluice_server_start(srv)) != 0) {
    fprintf(stderr, "%s: cannot start: %s\n", prog, sluice_strerror(rc));
    return 1;
  }
  printf("listening on %d\n", bound_port);
  fflush(stdout);
  int sig = 0;
  while (sigwait(stop_signals, &sig) != 0)
    ;
  fprintf(stderr, "%s: %s, shutting down\n", prog,
          sig == SIGINT ? "SIGINT" : "SIGTERM");
  sluice_server_shutdown(srv, grace_ms);
  /* What the connection limits did (tests read this line). */
  fprintf(stderr,
          "%s: connections: %llu accepted, %llu max_age, %llu max_idle, "
          "%llu too_many_pings, %llu keepalive_timeouts, %llu grace_expired\n",
          prog,
          (unsigned long long)sluice_server_conn_events(
              srv, SLUICE_SERVER_CONNECTIONS_ACCEPTED),
          (unsigned long long)sluice_server_conn_events(
              srv, SLUICE_SERVER_GOAWAY_MAX_AGE),
          (unsigned long long)sluice_server_conn_events(
              srv, SLUICE_SERVER_GOAWAY_MAX_IDLE),
          (unsigned long long)sluice_server_conn_events(
              srv, SLUICE_SERVER_GOAWAY_TOO_MANY_PINGS),
          (unsigned long long)sluice_server_conn_events(
              srv, SLUICE_SERVER_KEEPALIVE_TIMEOUTS),
          (unsigned long long)sluice_server_conn_events(
              srv, SLUICE_SERVER_GRACE_EXPIRED));
  return 0;
}

int sluice_example_parse_ulong(const char *s, unsigned long max,
                               unsigned long *out) {
  char *end;
  if (s == NULL || *s == '\0' || *s == '-')
    return -1;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (*end != '\0' || errno != 0 || v > max)
    return -1;
  *out = v;
  return 0;
}

int sluice_example_server_tls(sluice_server_opts *o, const char *cert,
                              const char *key, const char *client_ca,
                              int require_client_cert, const char *prog) {
  sluice_tls_server_config tls;
  sluice_tls_server_config_init(&tls);
  tls.cert.file = cert;
  tls.key.file = key;
  if (client_ca != NULL) {
    tls.client_ca.file = client_ca;
    tls.client_cert = require_client_cert ? SLUICE_CLIENT_CERT_REQUIRE
                                          : SLUICE_CLIENT_CERT_REQUEST;
  }
  int rc = sluice_server_opts_set_tls(o, &tls);
  if (rc != 0) {
    fprintf(stderr, "%s: cannot use the TLS credentials: %s\n", prog,
            rc == SLUICE_ERR_TLS ? sluice_server_opts_last_error(o)
                                 : sluice_strerror(rc));
    return -1;
  }
  return 0;
}

/* ---- connection limits as flags */

void sluice_example_conn_flags_init(sluice_example_conn_flags *f) {
  memset(f, 0, sizeof *f);
  f->keepalive_time_ms = f->keepalive_timeout_ms = -1;
  f->keepalive_min_time_ms = -1;
  f->permit_without_calls = -1;
  f->max_ping_strikes = -1;
}

const char sluice_example_conn_flags_usage[] =
    "  --max-connection-idle-ms MS        close connections idle this long "
    "(0: never)\n"
    "  --max-connection-age-ms MS         age connections out (+-10 % "
    "jitter; 0: never)\n"
    "  --max-connection-age-grace-ms MS   drain time after that (0: no "
    "limit)\n"
    "  --keepalive-time-ms MS             PING after this long without "
    "reads (default 7200000; 0: off)\n"
    "  --keepalive-timeout-ms MS          close when the PING gets no "
    "answer (default 20000)\n"
    "  --keepalive-min-time-ms MS         least time between client PINGs "
    "(default 300000)\n"
    "  --keepalive-permit-without-calls B allow client PINGs without calls "
    "(0 or 1, default 0)\n"
    "  --max-ping-strikes N               bad PINGs before GOAWAY "
    "too_many_pings (default 2; 0: no limit)\n";

int sluice_example_conn_flag(const char *flag, const char *val,
                             sluice_example_conn_flags *f, int *bad) {
  static const unsigned long max_ms = 365ul * 24 * 3600 * 1000;
  unsigned long v = 0;
  unsigned long *u = NULL;
  long *l = NULL;
  if (strcmp(flag, "--max-connection-idle-ms") == 0)
    u = &f->max_idle_ms;
  else if (strcmp(flag, "--max-connection-age-ms") == 0)
    u = &f->max_age_ms;
  else if (strcmp(flag, "--max-connection-age-grace-ms") == 0)
    u = &f->max_age_grace_ms;
  else if (strcmp(flag, "--keepalive-time-ms") == 0)
    l = &f->keepalive_time_ms;
  else if (strcmp(flag, "--keepalive-timeout-ms") == 0)
    l = &f->keepalive_timeout_ms;
  else if (strcmp(flag, "--keepalive-min-time-ms") == 0)
    l = &f->keepalive_min_time_ms;
  else if (strcmp(flag, "--max-ping-strikes") == 0)
    l = &f->max_ping_strikes;
  else if (strcmp(flag, "--keepalive-permit-without-calls") == 0) {
    *bad = sluice_example_parse_ulong(val, 1, &v) != 0;
    f->permit_without_calls = (int)v;
    return 1;
  } else
    return 0;
  *bad = sluice_example_parse_ulong(
             val, l == &f->max_ping_strikes ? 0x7ffffffful : max_ms, &v) != 0;
  if (u)
    *u = v;
  else
    *l = (long)v;
  return 1;
}

int sluice_example_apply_conn_flags(sluice_server_opts *o,
                                    const sluice_example_conn_flags *f,
                                    const char *prog) {
  int rc = sluice_server_opts_set_connection_limits(
      o, f->max_idle_ms, f->max_age_ms, f->max_age_grace_ms);
  if (rc == 0 && (f->keepalive_time_ms >= 0 || f->keepalive_timeout_ms >= 0))
    rc = sluice_server_opts_set_keepalive(
        o, f->keepalive_time_ms >= 0 ? (uint64_t)f->keepalive_time_ms : 7200000,
        f->keepalive_timeout_ms >= 0 ? (uint64_t)f->keepalive_timeout_ms
                                     : 20000);
  if (rc == 0 && (f->keepalive_min_time_ms >= 0 ||
                  f->permit_without_calls >= 0 || f->max_ping_strikes >= 0))
    rc = sluice_server_opts_set_keepalive_enforcement(
        o,
        f->keepalive_min_time_ms >= 0 ? (uint64_t)f->keepalive_min_time_ms
                                      : 300000,
        f->permit_without_calls > 0,
        f->max_ping_strikes >= 0 ? (uint32_t)f->max_ping_strikes : 2);
  if (rc != 0) {
    fprintf(stderr, "%s: bad connection limits: %s\n", prog,
            sluice_strerror(rc));
    return -1;
  }
  return 0;
}
