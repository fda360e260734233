/* What every example and benchmark server's main() does around its own
 * set-up: stop signals, host:port, and the listen / start / wait / shut
 * down sequence (greeter_server, interop_server, ticker_server,
 * bench/echo_server). */
#ifndef SLUICE_EXAMPLES_SERVE_H
#define SLUICE_EXAMPLES_SERVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/sluice.h>

/* Blocks SIGINT and SIGTERM, which sluice_example_serve() then takes with
 * sigwait(). SIGPIPE is left alone: the library never raises it. Call it
 * before any thread exists: every
 * thread inherits the mask, so none is ever interrupted and no signal
 * handler is needed. */
void sluice_example_block_signals(sigset_t *stop_signals);

/* "host:port" into out[cap], with brackets around an IPv6 literal. Returns
 * 0, or -1 after printing "PROG: host name too long". */
int sluice_example_address(char *out, size_t cap, const char *host,
                           unsigned long port, const char *prog);

/* A decimal number 0..max from a command-line value (no sign, no
 * trailing characters). Returns 0, or -1 when s is NULL or not one. */
int sluice_example_parse_ulong(const char *s, unsigned long max,
                               unsigned long *out);

/* Makes o accept TLS only, with the certificate chain and key files, and,
 * with client_ca, client certificates checked against it (required when
 * require_client_cert, else requested). The files are read now. Returns 0,
 * or -1 after printing "PROG: cannot use the TLS credentials: why". */
int sluice_example_server_tls(sluice_server_opts *o, const char *cert,
                              const char *key, const char *client_ca,
                              int require_client_cert, const char *prog);

/* The server-side connection limits every example server takes as flags
 * (docs/connections.md); 0 / -1 fields: the library's default. */
typedef struct sluice_example_conn_flags {
  unsigned long max_idle_ms, max_age_ms, max_age_grace_ms; /* 0: none */
  long keepalive_time_ms, keepalive_timeout_ms;            /* -1: default */
  long keepalive_min_time_ms;                              /* -1: default */
  int permit_without_calls;                                /* -1: default */
  long max_ping_strikes;                                   /* -1: default */
} sluice_example_conn_flags;

void sluice_example_conn_flags_init(sluice_example_conn_flags *f);

/* The help text of those flags (for a usage message). */
extern const char sluice_example_conn_flags_usage[];

/* If flag is one of them (--max-connection-idle-ms, --max-connection-age-ms,
 * --max-connection-age-grace-ms, --keepalive-time-ms,
 * --keepalive-timeout-ms, --keepalive-min-time-ms,
 * --keepalive-permit-without-calls, --max-ping-strikes; each takes a
 * value), parses val into f and returns 1, setting *bad when val is not a
 * valid number; else returns 0. */
int sluice_example_conn_flag(const char *flag, const char *val,
                             sluice_example_conn_flags *f, int *bad);

/* Sets f's limits on o. Returns 0, or -1 after printing "PROG: why". */
int sluice_example_apply_conn_flags(sluice_server_opts *o,
                                    const sluice_example_conn_flags *f,
                                    const char *prog);

/* Listens on address, starts srv, prints "listening on <port>" on stdout,
 * waits for one of stop_signals, prints "PROG: SIGTERM, shutting down" on
 * stderr and shuts srv down with grace_ms for calls in flight. Returns 0,
 * or 1 after printing why listening or starting failed. */
int sluice_example_serve(sluice_server *srv, const char *address,
                         const sigset_t *stop_signals, uint64_t grace_ms,
                         const char *prog);

#endif
