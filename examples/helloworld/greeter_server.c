/* greeter_server: serves helloworld.Greeter/SayHello.
 *
 *   greeter_server [--port N] [--host H] [--threads T]
 *                  [--use_tls --tls_cert FILE --tls_key FILE
 *                   [--tls_client_ca FILE [--require_client_cert]]]
 *                  [connection limits: --max-connection-age-ms MS ...]
 *                  [--no-health] [--no-reflection]
 *
 * Serves grpc.health.v1.Health too (the library's, all SERVING; NOT_SERVING
 * at shutdown) unless --no-health, and server reflection (grpc.reflection.v1
 * and v1alpha; docs/reflection.md) unless --no-reflection.
 *
 * Replies "Hello <name>". Request metadata whose key starts with "x-echo-" is
 * sent back twice, as initial and as trailing metadata, so that tests can
 * check a metadata round trip in both directions. A name "sleep:<ms>" is
 * answered <ms> milliseconds later from another thread: the reply-later path,
 * and a slow server for deadline tests.
 *
 * With --use_tls it accepts TLS only, with the certificate chain and key
 * given (PEM files; scripts/gen-test-certs.sh makes test ones). A key or
 * certificate that cannot be loaded is reported and exits 2, like a bad
 * flag. --tls_client_ca asks clients for a certificate from those CAs and
 * --require_client_cert refuses clients without one (mutual TLS); the
 * subject of a verified client certificate goes back as the initial
 * metadata "x-peer-identity".
 *
 * The connection limits (max idle, max age and its grace, keepalive and
 * PING enforcement; see --help and docs/connections.md) are the library's
 * options as flags.
 *
 * Prints "listening on <port>" on stdout once it accepts (port 0 picks a free
 * one, so scripts read the port from that line). SIGINT or SIGTERM shut it
 * down gracefully.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "helloworld.sluice.h"
#include "serve.h"

#define DEFAULT_PORT 50051
#define SHUTDOWN_GRACE_MS 2000
#define MAX_SLEEP_MS 3600000UL

/* ---- delayed replies
 *
 * Each "sleep:" request gets a detached thread that waits on a condition
 * variable rather than in nanosleep(), so that shutdown can wake the ones
 * still waiting: every call must be finished before sluice_server_del(), and
 * a thread must never touch a call after the server is gone. */

static pthread_mutex_t sleepers_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleepers_cv; /* CLOCK_MONOTONIC, set up in main */
static unsigned sleepers;          /* threads still holding a call */
static int stopping;               /* set once the server has shut down */

typedef struct delayed_reply {
  sluice_server_call *call;
  struct timespec due; /* CLOCK_MONOTONIC */
  char *message;
} delayed_reply;

static int reply_message(sluice_server_call *call, const char *message) {
  Helloworld__HelloReply reply = HELLOWORLD__HELLO_REPLY__INIT;
  reply.message = (char *)message;
  return helloworld__greeter__say_hello__reply(call, &reply);
}

static void *delayed_reply_main(void *arg) {
  delayed_reply *d = arg;
  int rc = 0;

  pthread_mutex_lock(&sleepers_mu);
  while (!stopping && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&sleepers_cv, &sleepers_mu, &d->due);
  int cut_short = stopping && rc != ETIMEDOUT;
  pthread_mutex_unlock(&sleepers_mu);

  if (cut_short)
    sluice_server_call_finish(d->call, SLUICE_STATUS_UNAVAILABLE,
                              "server shutting down", NULL);
  else
    reply_message(d->call, d->message);
  free(d->message);
  free(d);

  pthread_mutex_lock(&sleepers_mu);
  sleepers--;
  pthread_cond_broadcast(&sleepers_cv);
  pthread_mutex_unlock(&sleepers_mu);
  return NULL;
}

/* Takes ownership of message. Returns 0, or -1 when no thread could be
 * started (message is then freed and the caller still owns the call). */
static int reply_later(sluice_server_call *call, char *message,
                       unsigned long ms) {
  delayed_reply *d = malloc(sizeof *d);
  if (d == NULL) {
    free(message);
    return -1;
  }
  d->call = call;
  d->message = message;
  clock_gettime(CLOCK_MONOTONIC, &d->due);
  d->due.tv_sec += (time_t)(ms / 1000);
  d->due.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (d->due.tv_nsec >= 1000000000L) {
    d->due.tv_sec++;
    d->due.tv_nsec -= 1000000000L;
  }

  pthread_attr_t attr;
  pthread_t tid;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_mutex_lock(&sleepers_mu);
  int rc = pthread_create(&tid, &attr, delayed_reply_main, d);
  if (rc == 0)
    sleepers++;
  pthread_mutex_unlock(&sleepers_mu);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    free(d->message);
    free(d);
    return -1;
  }
  return 0;
}

/* Wakes every sleeper (they finish their calls at once) and waits until none
 * holds a call any more. */
static void stop_sleepers(void) {
  pthread_mutex_lock(&sleepers_mu);
  stopping = 1;
  pthread_cond_broadcast(&sleepers_cv);
  while (sleepers > 0)
    pthread_cond_wait(&sleepers_cv, &sleepers_mu);
  pthread_mutex_unlock(&sleepers_mu);
}

/* ---- the handler (runs on a server loop thread) */

/* "sleep:<ms>" -> 1 and *ms; anything else -> 0. */
static int parse_sleep(const char *name, unsigned long *ms) {
  static const char prefix[] = "sleep:";
  if (strncmp(name, prefix, sizeof prefix - 1) != 0)
    return 0;
  const char *digits = name + sizeof prefix - 1;
  char *end;
  errno = 0;
  unsigned long v = strtoul(digits, &end, 10);
  if (end == digits || *end != '\0' || errno != 0 || digits[0] == '-')
    return 0;
  *ms = v > MAX_SLEEP_MS ? MAX_SLEEP_MS : v;
  return 1;
}

static void echo_metadata(sluice_server_call *call) {
  static const char prefix[] = "x-echo-";
  const sluice_metadata *md = sluice_server_call_metadata(call);
  size_t n = sluice_metadata_count(md);
  for (size_t i = 0; i < n; i++) {
    const char *key;
    const void *value;
    size_t len;
    if (sluice_metadata_get(md, i, &key, &value, &len) != 0)
      continue;
    if (strncmp(key, prefix, sizeof prefix - 1) != 0)
      continue;
    sluice_server_call_add_initial_metadata(call, key, value, len);
    sluice_server_call_add_trailing_metadata(call, key, value, len);
  }
}

static void say_hello(sluice_server_call *call,
                      const Helloworld__HelloRequest *req, void *user_data) {
  (void)user_data;
  const char *name = req->name != NULL ? req->name : "";

  echo_metadata(call);
  const char *peer = sluice_server_call_peer_identity(call);
  if (peer != NULL)
    sluice_server_call_add_initial_metadata(call, "x-peer-identity", peer,
                                            strlen(peer));

  size_t len = strlen("Hello ") + strlen(name) + 1;
  char *message = malloc(len);
  if (message == NULL) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  snprintf(message, len, "Hello %s", name);

  unsigned long ms;
  if (parse_sleep(name, &ms)) {
    if (reply_later(call, message, ms) != 0)
      sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                                "cannot start a thread for a delayed reply",
                                NULL);
    return;
  }
  reply_message(call, message);
  free(message);
}

/* ---- command line */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [--port N] [--host H] [--threads T]\n"
          "          [--use_tls --tls_cert FILE --tls_key FILE\n"
          "           [--tls_client_ca FILE [--require_client_cert]]]\n"
          "          [--no-health]\n"
          "  --port N              port to listen on (default %d; 0 picks a "
          "free one)\n"
          "  --host H              address to listen on (default "
          "127.0.0.1)\n"
          "  --threads T           server loop threads (default: one per "
          "core)\n"
          "  --use_tls[=B]         accept TLS only (B: true or false)\n"
          "  --tls_cert FILE       the server's certificate chain (PEM)\n"
          "  --tls_key FILE        its private key (PEM)\n"
          "  --tls_client_ca FILE  ask clients for a certificate from these "
          "CAs\n"
          "  --require_client_cert[=B]\n"
          "                        refuse clients without one (needs "
          "--tls_client_ca)\n"
          "  --no-health           do not serve grpc.health.v1.Health (on by "
          "default)\n"
          "  --no-reflection       do not serve server reflection (on by "
          "default)\n"
          "%s",
          prog, DEFAULT_PORT, sluice_example_conn_flags_usage);
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

/* &value when arg is name or name=..., else NULL. */
static int *bool_flag(const char *arg, const char *name, int *value) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '='))
    return value;
  return NULL;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *host = "127.0.0.1";
  const char *tls_cert = NULL, *tls_key = NULL, *tls_client_ca = NULL;
  unsigned long port = DEFAULT_PORT, threads = 0;
  int use_tls = 0, require_client_cert = 0, health = 1, reflection = 1;
  sluice_example_conn_flags conn_flags;
  sluice_example_conn_flags_init(&conn_flags);

  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
      usage(stdout, prog);
      return 0;
    }
    /* Booleans: --flag alone is true; --flag=B, or --flag B when the next
     * argument is true or false. */
    int *boolean = bool_flag(flag, "--use_tls", &use_tls);
    if (boolean == NULL)
      boolean = bool_flag(flag, "--require_client_cert", &require_client_cert);
    if (boolean != NULL) {
      const char *eq = strchr(flag, '=');
      if (eq != NULL)
        *boolean = parse_bool(eq + 1);
      else if (i + 1 < argc && parse_bool(argv[i + 1]) >= 0)
        *boolean = parse_bool(argv[++i]);
      else
        *boolean = 1;
      if (*boolean < 0) {
        fprintf(stderr, "%s: %s wants true or false\n", prog, flag);
        usage(stderr, prog);
        return 2;
      }
      continue;
    }
    if (strcmp(flag, "--no-health") == 0) {
      health = 0;
      continue;
    }
    if (strcmp(flag, "--no-reflection") == 0) {
      reflection = 0;
      continue;
    }
    const char *val = i + 1 < argc ? argv[++i] : NULL;
    int bad = 0;
    if (sluice_example_conn_flag(flag, val, &conn_flags, &bad)) {
      /* parsed */
    } else if (strcmp(flag, "--port") == 0) {
      bad = sluice_example_parse_ulong(val, 65535, &port);
    } else if (strcmp(flag, "--threads") == 0) {
      bad = sluice_example_parse_ulong(val, 1024, &threads);
    } else if (strcmp(flag, "--host") == 0) {
      bad = val == NULL || *val == '\0';
      host = val;
    } else if (strcmp(flag, "--tls_cert") == 0) {
      bad = val == NULL || *val == '\0';
      tls_cert = val;
    } else if (strcmp(flag, "--tls_key") == 0) {
      bad = val == NULL || *val == '\0';
      tls_key = val;
    } else if (strcmp(flag, "--tls_client_ca") == 0) {
      bad = val == NULL || *val == '\0';
      tls_client_ca = val;
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "%s: %s needs a valid value\n", prog, flag);
      usage(stderr, prog);
      return 2;
    }
  }
  const char *conflict = NULL;
  if (use_tls && (tls_cert == NULL || tls_key == NULL))
    conflict = "--use_tls needs --tls_cert and --tls_key";
  else if (!use_tls && (tls_cert != NULL || tls_key != NULL ||
                        tls_client_ca != NULL || require_client_cert))
    conflict = "--tls_cert, --tls_key, --tls_client_ca and "
               "--require_client_cert need --use_tls";
  else if (require_client_cert && tls_client_ca == NULL)
    conflict = "--require_client_cert needs --tls_client_ca";
  if (conflict != NULL) {
    fprintf(stderr, "%s: %s\n", prog, conflict);
    usage(stderr, prog);
    return 2;
  }

  /* Before any thread exists (see serve.h). */
  sigset_t stop_signals;
  sluice_example_block_signals(&stop_signals);

  pthread_condattr_t cattr;
  pthread_condattr_init(&cattr);
  pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
  pthread_cond_init(&sleepers_cv, &cattr);
  pthread_condattr_destroy(&cattr);

  char address[300];
  if (sluice_example_address(address, sizeof address, host, port, prog) != 0)
    return 2;

  int exit_code = 1, rc;
  sluice_server_opts *opts = NULL;
  sluice_server *srv = NULL;
  const Helloworld__Greeter_SluiceHandlers handlers = {.say_hello = say_hello};

  if ((rc = sluice_server_opts_new(&opts)) != 0 ||
      (rc = sluice_server_opts_set_threads(opts, (unsigned)threads)) != 0 ||
      (rc = sluice_server_opts_set_health(opts, health)) != 0 ||
      (rc = sluice_server_opts_set_reflection(opts, reflection)) != 0) {
    fprintf(stderr, "%s: cannot create the server: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  if (sluice_example_apply_conn_flags(opts, &conn_flags, prog) != 0) {
    exit_code = 2;
    goto out;
  }
  if (use_tls &&
      sluice_example_server_tls(opts, tls_cert, tls_key, tls_client_ca,
                                require_client_cert, prog) != 0) {
    exit_code = 2; /* bad arguments */
    goto out;
  }
  if ((rc = sluice_server_new(&srv, opts)) != 0) {
    fprintf(stderr, "%s: cannot create the server: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }
  if ((rc = helloworld__greeter__sluice_register(srv, &handlers, NULL)) != 0) {
    fprintf(stderr, "%s: cannot register Greeter: %s\n", prog,
            sluice_strerror(rc));
    goto out;
  }

  /* In-flight calls, delayed ones included, get the grace period to finish;
   * the sleepers still waiting after it are woken to release their calls
   * before the server is freed. */
  exit_code = sluice_example_serve(srv, address, &stop_signals,
                                   SHUTDOWN_GRACE_MS, prog);

out:
  stop_sleepers();
  sluice_server_del(srv);
  sluice_server_opts_del(opts);
  pthread_cond_destroy(&sleepers_cv);
  return exit_code;
}
