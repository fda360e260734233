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
