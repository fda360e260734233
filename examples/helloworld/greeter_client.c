/* greeter_client: one blocking helloworld.Greeter/SayHello call.
 *
 *   greeter_client --target HOST:PORT --name X [--timeout-ms N]
 *                  [--metadata key=value ...] [--print-metadata]
 *
 * Prints the reply message alone on a line on stdout and exits 0. On failure
 * prints "<STATUS_NAME>: <message>" on stderr and exits 1; bad flags exit 2.
 *
 * --metadata may be repeated. For a binary key (ending in "-bin") the value
 * may spell any byte as \xNN (and a backslash as \\). --print-metadata prints
 * the response's metadata on stderr, one "initial key=value" or
 * "trailing key=value" line per entry, with bytes outside printable ASCII and
 * the backslash written in that same \xNN / \\ notation.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

#include "helloworld.sluice.h"

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --target HOST:PORT --name X [--timeout-ms N]\n"
          "          [--metadata key=value ...] [--print-metadata]\n"
          "  --target T        where to call (host:port, dns:, ipv4:, unix:)\n"
          "  --name X          the name to greet\n"
          "  --timeout-ms N    deadline of the call (default: none)\n"
          "  --metadata K=V    custom metadata to send (repeatable; \\xNN "
          "escapes in -bin values)\n"
          "  --print-metadata  print the response metadata on stderr\n",
          prog);
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

int main(int argc, char **argv) {
  const char *prog = argv[0];
  const char *target = NULL, *name = NULL;
  unsigned long long timeout_ms = 0;
  int want_metadata = 0, exit_code = 2;
  sluice_metadata *md = NULL;
  sluice_channel *ch = NULL;
  Helloworld__HelloReply *resp = NULL;
  sluice_status status;
  sluice_status_init(&status);

  signal(SIGPIPE, SIG_IGN);
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
    if (strcmp(flag, "--target") != 0 && strcmp(flag, "--name") != 0 &&
        strcmp(flag, "--timeout-ms") != 0 && strcmp(flag, "--metadata") != 0) {
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

  exit_code = 1;
  err = sluice_channel_new(&ch, target, NULL);
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

  Helloworld__HelloRequest req = HELLOWORLD__HELLO_REQUEST__INIT;
  req.name = (char *)name;
  sluice_status_code code =
      helloworld__greeter__say_hello__blocking(ch, &req, &resp, &opts, &status);

  if (code == SLUICE_STATUS_OK && resp != NULL) {
    printf("%s\n", resp->message != NULL ? resp->message : "");
    exit_code = 0;
  } else {
    fprintf(stderr, "%s: %s\n", sluice_status_name(code),
            status.message != NULL ? status.message : "");
  }
  if (want_metadata) {
    print_metadata("initial", status.initial_md);
    print_metadata("trailing", status.trailing_md);
  }
  if (fflush(stdout) != 0)
    exit_code = 1;

out:
  if (resp != NULL)
    protobuf_c_message_free_unpacked(&resp->base, NULL);
  sluice_status_clear(&status);
  sluice_channel_del(ch);
  sluice_metadata_del(md);
  return exit_code;
}
