/* greeter_client: one blocking helloworld.Greeter/SayHello call (or N).
 *
 *   greeter_client --target HOST:PORT --name X [--timeout-ms N]
 *                  [--metadata key=value ...] [--print-metadata]
 *                  [--use_tls [--tls_ca FILE] [--server_host_override NAME]
 *                   [--tls_cert FILE --tls_key FILE]]
 *                  [--service-config FILE|JSON] [--breakers REQ,PEND,RETRIES]
 *                  [--count N] [--stats]
 *                  [--keepalive-time-ms N [--keepalive-timeout-ms N]
 *                   [--keepalive-without-calls]] [--wait-for-ready]
 *                  [--linger-ms N]
 *
 * Prints the reply message alone on a line on stdout and exits 0. On failure
 * prints "<STATUS_NAME>: <message>" on stderr and exits 1; bad flags, and TLS
 * credentials that cannot be loaded, exit 2.
 *
 * --service-config sets the channel's gRPC service config (retryPolicy,
 * hedgingPolicy, retryThrottling ...; sluice/resilience.h): the JSON itself
 * when the argument starts with '{', else a file holding it. --breakers sets
 * its circuit breakers (calls in flight, calls pending, retries in flight; 0
 * leaves one off). A config or breakers the library refuses exit 2, with the
 * field it named.
 *
 * --count N makes N calls one after the other on the same channel. Each
 * reply still goes to stdout (flushed at once, so a script reading a pipe
 * follows the calls as they end) and each failure to stderr as above; then a
 * summary line goes to stdout:
 *   calls=N OK=.. UNAVAILABLE=.. ... (every code seen, in code order)
 * followed by the channel's resilience counters (see below); the exit
 * status is 0 when every call succeeded, else 1. --stats prints those
 * counters also after a single call:
 *   resilience: calls=.. attempts=.. retries=.. transparent=.. hedges=..
 *               denials=.. (throttled .., budget .., pushback ..,
 *               deadline .., max_retries ..) exhausted=..
 *               breaker_refused=.. (max_requests .., max_pending ..)
 * (one line; from sluice_channel_get_resilience_stats()), and
 *   keepalive: time_ms=.. too_many_pings=.. state=..
 * (sluice_channel_get_keepalive(), sluice_channel_get_state()).
 *
 * --keepalive-time-ms turns client keepalive on (gRFC A8, at least 1000;
 * --keepalive-timeout-ms defaults to 20000; --keepalive-without-calls pings
 * while no call is open too). --wait-for-ready makes every call wait for a
 * ready server until its deadline instead of failing fast. --linger-ms N
 * keeps the channel open N ms after each call but the last (keepalive
 * pings without calls happen then).
 *
 * --use_tls calls over TLS, trusting the CA certificates of --tls_ca (the
 * system's roots without it) and checking the server's certificate against
 * --server_host_override instead of the target's host when given (for test
 * certificates, or a server addressed by IP). --tls_cert and --tls_key
 * present a client certificate (mutual TLS).
 *
 * --metadata may be repeated. For a binary key (ending in "-bin") the value
 * may spell any byte as \xNN (and a backslash as \\). --print-metadata prints
 * the response's metadata on stderr, one "initial key=value" or
 * "trailing key=value" line per entry, with bytes outside printable ASCII and
 * the backslash written in that same \xNN / \\ notation.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "helloworld.sluice.h"
#include "resil_flags.h"

#define MAX_COUNT 100000000ULL

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --target HOST:PORT --name X [--timeout-ms N]\n"
          "          [--metadata key=value ...] [--print-metadata]\n"
          "          [--use_tls [--tls_ca FILE] [--server_host_override "
          "NAME]\n"
          "           [--tls_cert FILE --tls_key FILE]]\n"
          "          [--service-config FILE|JSON] [--breakers "
          "REQ,PEND,RETRIES]\n"
          "          [--count N] [--stats]\n"
          "  --target T        where to call (host:port, dns:, ipv4:, unix:)\n"
          "  --name X          the name to greet\n"
          "  --timeout-ms N    deadline of the call (default: none)\n"
          "  --metadata K=V    custom metadata to send (repeatable; \\xNN "
          "escapes in -bin values)\n"
          "  --print-metadata  print the response metadata on stderr\n"
          "  --use_tls[=B]     call over TLS (B: true or false)\n"
          "  --tls_ca FILE     CA certificates to trust (PEM; default: the "
          "system's)\n"
          "  --server_host_override NAME\n"
          "                    the name the server's certificate must have "
          "(and SNI)\n"
          "  --tls_cert FILE   client certificate chain, for mutual TLS "
          "(PEM)\n"
          "  --tls_key FILE    its private key (PEM)\n"
          "  --service-config FILE|JSON\n"
          "                    gRPC service config of the channel (inline "
          "when it\n"
          "                    starts with '{'): retries, hedging, throttling\n"
          "  --breakers REQ,PEND,RETRIES\n"
          "                    circuit breakers: calls in flight, pending, "
          "retries\n"
          "                    in flight (0 = off)\n"
          "  --count N         N sequential calls, then a summary line of "
          "status\n"
          "                    counts and retry counters on stdout\n"
          "  --stats           print the retry counters after a single "
          "call too\n"
          "  --keepalive-time-ms N     client keepalive: PING after N ms "
          "without\n"
          "                    a byte read (at least 1000; default off)\n"
          "  --keepalive-timeout-ms N  close when nothing arrives N ms after "
          "it\n"
          "                    (default 20000)\n"
          "  --keepalive-without-calls ping while no call is open too\n"
          "  --wait-for-ready  calls wait for a ready server (until their "
          "deadline)\n"
          "  --linger-ms N     keep the channel open N ms between calls\n",
          prog);
}

static void sleep_ms(unsigned long long ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Decodes \xNN and \\ in place; returns the decoded length or -1. */
static long unescape(char *s) {
  char *out = s;
  for (const char *in = s; *in != '\0'; in++) {
    if (*in != '\\') {
      *out++ = *in;
    } else if (in[1] == '\\') {
      *out++ = '\\';
      in++;
    } else if (in[1] == 'x' && hexval(in[2]) >= 0 && hexval(in[3]) >= 0) {
      *out++ = (char)(hexval(in[2]) * 16 + hexval(in[3]));
      in += 3;
    } else {
      return -1;
    }
  }
  return out - s;
}

static int has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Parses "key=value" and appends it to md. Returns 0 or -1 (message
 * printed). */
static int add_metadata(sluice_metadata *md, const char *prog,
                        const char *arg) {
  const char *eq = strchr(arg, '=');
  if (eq == NULL || eq == arg) {
    fprintf(stderr, "%s: --metadata wants key=value, got '%s'\n", prog, arg);
    return -1;
  }
  size_t klen = (size_t)(eq - arg);
  char *key = malloc(klen + 1);
  char *value = strdup(eq + 1);
  int rc = -1;
  if (key == NULL || value == NULL) {
    fprintf(stderr, "%s: out of memory\n", prog);
    goto out;
  }
  memcpy(key, arg, klen);
  key[klen] = '\0';
  long vlen = (long)strlen(value);
  if (has_suffix(key, "-bin") && (vlen = unescape(value)) < 0) {
    fprintf(stderr, "%s: bad escape in the value of %s\n", prog, key);
    goto out;
  }
  int err = sluice_metadata_add(md, key, value, (size_t)vlen);
  if (err != 0) {
    fprintf(stderr, "%s: cannot send metadata '%s': %s\n", prog, key,
            sluice_strerror(err));
    goto out;
  }
  rc = 0;
out:
  free(key);
  free(value);
  return rc;
}

static void print_metadata(const char *what, const sluice_metadata *md) {
  size_t n = sluice_metadata_count(md);
  for (size_t i = 0; i < n; i++) {
    const char *key;
    const void *value;
    size_t len;
    if (sluice_metadata_get(md, i, &key, &value, &len) != 0)
      continue;
    fprintf(stderr, "%s %s=", what, key);
    const unsigned char *v = value;
    for (size_t j = 0; j < len; j++) {
      if (v[j] == '\\')
        fputs("\\\\", stderr);
      else if (v[j] >= 0x20 && v[j] <= 0x7e)
        fputc(v[j], stderr);
      else
        fprintf(stderr, "\\x%02x", v[j]);
    }
    fputc('\n', stderr);
  }
}

/* "true"/"1"/"yes" -> 1, "false"/"0"/"no" -> 0, anything else -> -1. */
static int parse_bool(const char *v) {
  if (v == NULL)
    return -1;
  if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
    return 1;
  if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0)
    return 0;
  return -1;
}

/* The TLS flags. */
typedef struct tls_flags {
  int use_tls;
  const char *ca, *cert, *key, *host_override;
} tls_flags;

/* If argv[*i] is a TLS flag, takes it (and its value, advancing *i) into
 * t and returns 1; 0 when it is not one; -1 (message printed) when its
 * value is missing or bad. */
static int take_tls_flag(tls_flags *t, const char *prog, int argc, char **argv,
                         int *i) {
  const char *flag = argv[*i];
  /* --use_tls, --use_tls=B or --use_tls B: a boolean. */
  static const char use_tls[] = "--use_tls";
  const size_t n = sizeof use_tls - 1;
  if (strncmp(flag, use_tls, n) == 0 && (flag[n] == '\0' || flag[n] == '=')) {
    if (flag[n] == '=')
      t->use_tls = parse_bool(flag + n + 1);
    else if (*i + 1 < argc && parse_bool(argv[*i + 1]) >= 0)
      t->use_tls = parse_bool(argv[++*i]);
    else
      t->use_tls = 1;
    if (t->use_tls < 0) {
      fprintf(stderr, "%s: --use_tls wants true or false\n", prog);
      return -1;
    }
    return 1;
  }
  const char **dst;
  if (strcmp(flag, "--tls_ca") == 0)
    dst = &t->ca;
  else if (strcmp(flag, "--tls_cert") == 0)
    dst = &t->cert;
  else if (strcmp(flag, "--tls_key") == 0)
    dst = &t->key;
  else if (strcmp(flag, "--server_host_override") == 0)
    dst = &t->host_override;
  else
    return 0;
  if (*i + 1 >= argc || argv[*i + 1][0] == '\0') {
    fprintf(stderr, "%s: %s needs a value\n", prog, flag);
    return -1;
  }
  *dst = argv[++*i];
  return 1;
}

/* Checks the TLS flags together. Returns 0 or -1 (message printed). */
static int check_tls_flags(const tls_flags *t, const char *prog) {
  if (!t->use_tls && (t->ca != NULL || t->cert != NULL || t->key != NULL ||
                      t->host_override != NULL)) {
    fprintf(stderr,
            "%s: --tls_ca, --tls_cert, --tls_key and "
            "--server_host_override need --use_tls\n",
            prog);
    return -1;
  }
  if ((t->cert == NULL) != (t->key == NULL)) {
    fprintf(stderr, "%s: --tls_cert and --tls_key go together\n", prog);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *target = NULL, *name = NULL;
  unsigned long long timeout_ms = 0, count = 1;
  int want_metadata = 0, want_stats = 0, exit_code = 2;
  char *service_config = NULL;
  uint32_t breakers[3];
  int have_breakers = 0;
  unsigned long long ka_time = 0, ka_timeout = 20000, linger_ms = 0;
  int ka_without_calls = 0, wait_for_ready = 0;
  tls_flags tls = {0};
  sluice_metadata *md = NULL;
  sluice_channel_opts *chopts = NULL;
  sluice_channel *ch = NULL;
  Helloworld__HelloReply *resp = NULL;
  sluice_status status;
  sluice_status_init(&status);

  int err = sluice_metadata_new(&md);
  if (err != 0) {
    fprintf(stderr, "%s: %s\n", prog, sluice_strerror(err));
    exit_code = 1;
    goto out;
  }

  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      exit_code = 0;
      goto out;
    }
    if (strcmp(flag, "--print-metadata") == 0) {
      want_metadata = 1;
      continue;
    }
    if (strcmp(flag, "--stats") == 0) {
      want_stats = 1;
      continue;
    }
    if (strcmp(flag, "--keepalive-without-calls") == 0) {
      ka_without_calls = 1;
      continue;
    }
    if (strcmp(flag, "--wait-for-ready") == 0) {
      wait_for_ready = 1;
      continue;
    }
    unsigned long long *num =
        strcmp(flag, "--keepalive-time-ms") == 0      ? &ka_time
        : strcmp(flag, "--keepalive-timeout-ms") == 0 ? &ka_timeout
        : strcmp(flag, "--linger-ms") == 0            ? &linger_ms
                                                      : NULL;
    if (num) {
      char *end = NULL;
      const char *val = i + 1 < argc ? argv[++i] : "";
      errno = 0;
      *num = strtoull(val, &end, 10);
      if (*val == '\0' || *val == '-' || *end != '\0' || errno != 0 ||
          *num > UINT32_MAX) {
        fprintf(stderr, "%s: %s wants a number, got '%s'\n", prog, flag, val);
        usage(stderr, prog);
        goto out;
      }
      continue;
    }
    int taken = take_tls_flag(&tls, prog, argc, argv, &i);
    if (taken < 0) {
      usage(stderr, prog);
      goto out;
    }
    if (taken > 0)
      continue;
    if (strcmp(flag, "--target") != 0 && strcmp(flag, "--name") != 0 &&
        strcmp(flag, "--timeout-ms") != 0 && strcmp(flag, "--metadata") != 0 &&
        strcmp(flag, "--service-config") != 0 &&
        strcmp(flag, "--breakers") != 0 && strcmp(flag, "--count") != 0) {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, flag);
      usage(stderr, prog);
      goto out;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: %s needs a value\n", prog, flag);
      usage(stderr, prog);
      goto out;
    }
    const char *val = argv[++i];
    if (strcmp(flag, "--target") == 0) {
      target = val;
    } else if (strcmp(flag, "--name") == 0) {
      name = val;
    } else if (strcmp(flag, "--timeout-ms") == 0) {
      char *end;
      errno = 0;
      timeout_ms = strtoull(val, &end, 10);
      if (*val == '\0' || *val == '-' || *end != '\0' || errno != 0) {
        fprintf(stderr, "%s: --timeout-ms wants a number, got '%s'\n", prog,
                val);
        usage(stderr, prog);
        goto out;
      }
    } else if (strcmp(flag, "--count") == 0) {
      char *end;
      errno = 0;
      count = strtoull(val, &end, 10);
      if (*val == '\0' || *val == '-' || *end != '\0' || errno != 0 ||
          count == 0 || count > MAX_COUNT) {
        fprintf(stderr, "%s: --count wants a number in 1..%llu, got '%s'\n",
                prog, MAX_COUNT, val);
        usage(stderr, prog);
        goto out;
      }
    } else if (strcmp(flag, "--breakers") == 0) {
      if (sx_parse_breakers(val, breakers) != 0) {
        fprintf(stderr,
                "%s: --breakers wants REQ[,PEND[,RETRIES]] (numbers), got "
                "'%s'\n",
                prog, val);
        usage(stderr, prog);
        goto out;
      }
      have_breakers = 1;
    } else if (strcmp(flag, "--service-config") == 0) {
      char why[300];
      free(service_config);
      service_config = sx_load_service_config(val, why, sizeof why);
      if (service_config == NULL) {
        fprintf(stderr, "%s: --service-config: %s\n", prog, why);
        usage(stderr, prog);
        goto out;
      }
    } else if (add_metadata(md, prog, val) != 0) {
      usage(stderr, prog);
      goto out;
    }
  }
  if (target == NULL || name == NULL) {
    fprintf(stderr, "%s: --target and --name are required\n", prog);
    usage(stderr, prog);
    goto out;
  }
  if (check_tls_flags(&tls, prog) != 0) {
    usage(stderr, prog);
    goto out;
  }

  exit_code = 1;
  err = sluice_channel_opts_new(&chopts);
  if (err != 0) {
    fprintf(stderr, "%s: %s\n", prog, sluice_strerror(err));
    goto out;
  }
  if (tls.use_tls) {
    /* The files are read here: a missing or bad one fails now (exit 2). */
    sluice_tls_client_config cfg;
    sluice_tls_client_config_init(&cfg);
    cfg.ca.file = tls.ca;
    cfg.cert.file = tls.cert;
    cfg.key.file = tls.key;
    cfg.server_name_override = tls.host_override;
    err = sluice_channel_opts_set_tls(chopts, &cfg);
    if (err != 0) {
      fprintf(stderr, "%s: cannot use the TLS credentials: %s\n", prog,
              err == SLUICE_ERR_TLS ? sluice_channel_opts_last_error(chopts)
                                    : sluice_strerror(err));
      exit_code = 2;
      goto out;
    }
  }
  if (sx_apply(chopts, prog, service_config, have_breakers ? breakers : NULL) !=
      0) {
    exit_code = 2;
    goto out;
  }
  if (ka_time && sluice_channel_opts_set_keepalive(chopts, (uint32_t)ka_time,
                                                   (uint32_t)ka_timeout,
                                                   ka_without_calls) != 0) {
    fprintf(stderr,
            "%s: --keepalive-time-ms wants at least %u and "
            "--keepalive-timeout-ms at least 1\n",
            prog, SLUICE_KEEPALIVE_MIN_TIME_MS);
    exit_code = 2;
    goto out;
  }
  err = sluice_channel_new(&ch, target, chopts);
  if (err != 0) {
    fprintf(stderr, "%s: cannot use target '%s': %s\n",
            sluice_status_name(SLUICE_STATUS_INVALID_ARGUMENT), target,
            sluice_strerror(err));
    goto out;
  }

  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = timeout_ms;
  opts.metadata = md;
  opts.wait_for_ready = wait_for_ready;

  Helloworld__HelloRequest req = HELLOWORLD__HELLO_REQUEST__INIT;
  req.name = (char *)name;
  /* Calls by status code; the last slot counts codes out of range. */
  unsigned long long by_code[SLUICE_STATUS_UNAUTHENTICATED + 2] = {0};
  unsigned long long failed = 0;
  for (unsigned long long n = 0; n < count; n++) {
    if (n > 0) {
      if (linger_ms)
        sleep_ms(linger_ms);
      sluice_status_clear(&status);
      sluice_status_init(&status);
      if (resp != NULL)
        protobuf_c_message_free_unpacked(&resp->base, NULL);
      resp = NULL;
    }
    sluice_status_code code = helloworld__greeter__say_hello__blocking(
        ch, &req, &resp, &opts, &status);
    if (code == SLUICE_STATUS_OK && resp != NULL) {
      printf("%s\n", resp->message != NULL ? resp->message : "");
      fflush(stdout); /* a script reading a pipe sees each call as it ends */
    } else {
      failed++;
      if (code == SLUICE_STATUS_OK)
        code = SLUICE_STATUS_INTERNAL; /* OK without a reply */
      fprintf(stderr, "%s: %s\n", sluice_status_name(code),
              status.message != NULL ? status.message : "");
    }
    by_code[(unsigned)code <= SLUICE_STATUS_UNAUTHENTICATED
                ? (unsigned)code
                : SLUICE_STATUS_UNAUTHENTICATED + 1]++;
    if (want_metadata) {
      print_metadata("initial", status.initial_md);
      print_metadata("trailing", status.trailing_md);
    }
  }
  exit_code = failed == 0 ? 0 : 1;
  if (count > 1) {
    printf("calls=%llu", count);
    for (unsigned c = 0; c <= SLUICE_STATUS_UNAUTHENTICATED + 1; c++)
      if (by_code[c] != 0 || c == SLUICE_STATUS_OK)
        printf(" %s=%llu",
               c <= SLUICE_STATUS_UNAUTHENTICATED
                   ? sluice_status_name((sluice_status_code)c)
                   : "OTHER",
               by_code[c]);
    printf("\n");
  }
  if (count > 1 || want_stats) {
    sx_res r = {0};
    sx_res_add_channel(&r, ch);
    sx_res_print(stdout, "resilience: ", &r);
    uint32_t ka_now = 0;
    uint64_t calm = 0;
    sluice_channel_get_keepalive(ch, &ka_now, &calm);
    printf("keepalive: time_ms=%" PRIu32 " too_many_pings=%" PRIu64
           " state=%s\n",
           ka_now, calm,
           sluice_connectivity_state_name(sluice_channel_get_state(ch, 0)));
  }
  if (fflush(stdout) != 0)
    exit_code = 1;

out:
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&status);
  sluice_channel_del(ch);
  sluice_channel_opts_del(chopts);
  sluice_metadata_del(md);
  free(service_config);
  return exit_code;
}
