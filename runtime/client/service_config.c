/* The channel's service config: gRPC's service config JSON parsed with
 * jansson into typed method configs, the typed checks the public setters
 * share with it, and the lookup of a call's entry by path.
 *
 * Parsing builds a complete new config aside and hands it over only when
 * every field passed, so an invalid config never half-applies. Error texts
 * name the field as a JSON path ("methodConfig[0].retryPolicy.maxAttempts:
 * must be an integer > 1"); the typed checks name the C fields instead
 * ("retry.max_attempts: ..."), since that is what the caller wrote.
 */
#include "client/service_config.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "sluice/status.h"

/* The codes a policy may name: gRPC's 17, and OK is never one of them
 * (an OK call is done, not retried or tolerated). */
#define ALL_CODES ((1u << 17) - 1)
#define FAILURE_CODES (ALL_CODES & ~SLUICE_CODE_BIT(SLUICE_STATUS_OK))

/* google.protobuf.Duration's range: +-10000 years in seconds. */
#define DURATION_MAX_S UINT64_C(315576000000)

/* d (>= 0) has no fraction. Without floor(): libsluice does not link
 * libm. Every double from 2^53 up is an integer. */
static int integral(double d) {
  return d >= 9007199254740992.0 || d == (double)(uint64_t)d;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return SLUICE_ERR_INVALID_ARG;
}

/* ---- typed checks (the public setters and sluice_call_opts) ---- */

static int codes_ok(uint32_t codes) { return (codes & ~FAILURE_CODES) == 0; }

int sluice__retry_policy_check(const sluice_retry_policy *p, int per_call,
                               char *err, size_t errlen) {
  if (!p)
    return fail(err, errlen, "retry: NULL policy");
  if (p->max_attempts < (per_call ? 1u : 2u))
    return fail(err, errlen, "retry.max_attempts: must be at least %d",
                per_call ? 1 : 2);
  if (!p->initial_backoff_ms)
    return fail(err, errlen, "retry.initial_backoff_ms: must be > 0");
  if (!p->max_backoff_ms)
    return fail(err, errlen, "retry.max_backoff_ms: must be > 0");
  /* !(x > 0) also refuses NaN */
  if (!(p->backoff_multiplier > 0) || isinf(p->backoff_multiplier))
    return fail(err, errlen,
                "retry.backoff_multiplier: must be a finite number > 0");
  if (!p->retryable_codes)
    return fail(err, errlen,
                "retry.retryable_codes: must name at least one code");
  if (!codes_ok(p->retryable_codes))
    return fail(err, errlen,
                "retry.retryable_codes: only SLUICE_CODE_BIT() of "
                "CANCELLED..UNAUTHENTICATED (1..16), never OK");
  return 0;
}

int sluice__hedging_policy_check(const sluice_hedging_policy *p, int per_call,
                                 char *err, size_t errlen) {
  if (!p)
    return fail(err, errlen, "hedging: NULL policy");
  if (p->max_attempts < (per_call ? 1u : 2u))
    return fail(err, errlen, "hedging.max_attempts: must be at least %d",
                per_call ? 1 : 2);
  if (!codes_ok(p->non_fatal_codes))
    return fail(err, errlen,
                "hedging.non_fatal_codes: only SLUICE_CODE_BIT() of "
                "CANCELLED..UNAUTHENTICATED (1..16), never OK");
  return 0;
}

int sluice__method_config_check(const sluice_method_config *mc, char *err,
                                size_t errlen) {
  if (!mc)
    return fail(err, errlen, "method config: NULL");
  if (mc->wait_for_ready < -1 || mc->wait_for_ready > 1)
    return fail(err, errlen,
                "wait_for_ready: must be -1 (unset), 0 or 1, not %d",
                mc->wait_for_ready);
  if (mc->has_retry && mc->has_hedging)
    return fail(err, errlen,
                "has_retry and has_hedging: a method has one policy at most");
  if (mc->has_retry) {
    int rv = sluice__retry_policy_check(&mc->retry, 0, err, errlen);
    if (rv)
      return rv;
  }
  if (mc->has_hedging) {
    int rv = sluice__hedging_policy_check(&mc->hedging, 0, err, errlen);
    if (rv)
      return rv;
  }
  return 0;
}

/* ---- entries ---- */

static void entry_free(sluice__mc_entry *e) {
  free(e->service);
  free(e->method);
}

/* Splits name ("pkg.Svc/M", "pkg.Svc", "", or a path "/pkg.Svc/M") into
 * fresh strings. Returns 0, SLUICE_ERR_INVALID_ARG or SLUICE_ERR_NOMEM. */
static int split_name(const char *name, char **svc, char **meth) {
  /* "/pkg.Svc/M", a call's path, is the one form with a leading '/':
   * "/" and "/pkg.Svc" would read as the default and a service */
  int path = *name == '/';
  name += path;
  const char *slash = strchr(name, '/');
  if (path && !slash)
    return SLUICE_ERR_INVALID_ARG;
  size_t slen = slash ? (size_t)(slash - name) : strlen(name);
  const char *m = slash ? slash + 1 : "";
  /* a method needs its service; a second '/' or a trailing one is no
   * name gRPC can call */
  if (slash && (!slen || !*m || strchr(m, '/')))
    return SLUICE_ERR_INVALID_ARG;
  char *s = sluice__malloc(slen + 1);
  char *mm = sluice__strdup(m);
  if (!s || !mm) {
    free(s);
    free(mm);
    return SLUICE_ERR_NOMEM;
  }
  memcpy(s, name, slen);
  s[slen] = 0;
  *svc = s;
  *meth = mm;
  return 0;
}

static long entry_index(const sluice__svc_config *c, const char *svc,
                        const char *meth) {
  for (size_t i = 0; i < c->n; i++)
    if (strcmp(c->entries[i].service, svc) == 0 &&
        strcmp(c->entries[i].method, meth) == 0)
      return (long)i;
  return -1;
}

/* Appends the entry svc/meth -> mc, taking svc and meth (malloc'd): they
 * are freed when memory runs out. Returns 0 or SLUICE_ERR_NOMEM. */
static int entry_add(sluice__svc_config *c, char *svc, char *meth,
                     const sluice_method_config *mc) {
  sluice__mc_entry *grown =
      svc && meth ? sluice__realloc(c->entries, (c->n + 1) * sizeof *c->entries)
                  : NULL;
  if (!grown) {
    free(svc);
    free(meth);
    return SLUICE_ERR_NOMEM;
  }
  c->entries = grown;
  c->entries[c->n++] =
      (sluice__mc_entry){.service = svc, .method = meth, .mc = *mc};
  return 0;
}

int sluice__svc_config_set(sluice__svc_config *c, const char *name,
                           const sluice_method_config *mc, char *err,
                           size_t errlen) {
  if (!c || !name)
    return fail(err, errlen, "name: NULL");
  if (mc) {
    int rv = sluice__method_config_check(mc, err, errlen);
    if (rv)
      return rv;
  }
  char *svc, *meth;
  int rv = split_name(name, &svc, &meth);
  if (rv == SLUICE_ERR_INVALID_ARG)
    return fail(err, errlen,
                "name \"%s\": must be \"pkg.Service/Method\", "
                "\"pkg.Service\" or \"\"",
                name);
  if (rv)
    return rv;
  long i = entry_index(c, svc, meth);
  if (i < 0 && mc)
    return entry_add(c, svc, meth, mc);
  free(svc);
  free(meth);
  if (i >= 0 && mc)
    c->entries[i].mc = *mc;
  else if (i >= 0) { /* remove */
    entry_free(&c->entries[i]);
    c->entries[i] = c->entries[--c->n];
  }
  return 0;
}

uint32_t sluice__token_ratio_milli(double ratio) {
  if (!(ratio > 0) || isinf(ratio))
    return 0;
  /* Decimals past the third are dropped, as C-core does; the epsilon
   * keeps 0.29 (289.99999... in binary) at 290. Beyond what 1000 tokens
   * can hold, a larger ratio changes nothing. */
  double milli = ratio * 1000.0 + 1e-6;
  return milli > 1000000.0 ? 1000000u : (uint32_t)milli; /* truncated */
}

int sluice__svc_config_set_throttling(sluice__svc_config *c,
                                      uint32_t max_tokens,
                                      uint32_t ratio_milli) {
  if (!c || max_tokens > 1000 || (max_tokens && !ratio_milli))
    return SLUICE_ERR_INVALID_ARG;
  c->throttle_max_tokens = max_tokens;
  c->throttle_ratio_milli = max_tokens ? ratio_milli : 0;
  return 0;
}

const sluice_method_config *sluice__svc_config_find(const sluice__svc_config *c,
                                                    const char *path) {
  if (!c || !c->n || !path)
    return NULL;
  if (*path == '/')
    path++;
  const char *slash = strchr(path, '/');
  size_t slen = slash ? (size_t)(slash - path) : strlen(path);
  const char *meth = slash ? slash + 1 : "";
  const sluice_method_config *svc_mc = NULL, *def_mc = NULL;
  for (size_t i = 0; i < c->n; i++) {
    const sluice__mc_entry *e = &c->entries[i];
    if (!e->service[0]) {
      def_mc = &e->mc;
      continue;
    }
    if (strlen(e->service) != slen || memcmp(e->service, path, slen) != 0)
      continue;
    if (!e->method[0])
      svc_mc = &e->mc;
    else if (*meth && strcmp(e->method, meth) == 0)
      return &e->mc; /* names are unique: the exact one wins at once */
  }
  return svc_mc ? svc_mc : def_mc;
}

void sluice__svc_config_clear(sluice__svc_config *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++)
    entry_free(&c->entries[i]);
  free(c->entries);
  free(c->health_service);
  memset(c, 0, sizeof *c);
}

int sluice__svc_config_copy(sluice__svc_config *dst,
                            const sluice__svc_config *src) {
  memset(dst, 0, sizeof *dst);
  dst->throttle_max_tokens = src->throttle_max_tokens;
  dst->throttle_ratio_milli = src->throttle_ratio_milli;
  dst->lb_name = src->lb_name;
  dst->have_health = src->have_health;
  if (src->health_service &&
      !(dst->health_service = sluice__strdup(src->health_service)))
    goto nomem;
  if (src->n) {
    dst->entries = sluice__calloc(src->n, sizeof *dst->entries);
    if (!dst->entries)
      goto nomem;
    for (size_t i = 0; i < src->n; i++) {
      sluice__mc_entry *d = &dst->entries[i];
      const sluice__mc_entry *s = &src->entries[i];
      d->mc = s->mc;
      d->service = sluice__strdup(s->service);
      d->method = sluice__strdup(s->method);
      dst->n = i + 1; /* so that clear frees this one too */
      if (!d->service || !d->method)
        goto nomem;
    }
  }
  return 0;
nomem:
  sluice__svc_config_clear(dst);
  return SLUICE_ERR_NOMEM;
}

/* ---- JSON ---- */

/* Where the parser is: the JSON path of the object being read, for the
 * error texts. */
typedef struct jctx {
  char *err;
  size_t errlen;
  char path[96];
} jctx;

static int jfail(jctx *j, const char *field, const char *what) {
  return fail(j->err, j->errlen, "%s%s%s: %s", j->path,
              j->path[0] && field[0] ? "." : "", field, what);
}

/* A non-negative integer: a JSON number without a fraction, or a string of
 * decimal digits (proto3 JSON writes 64-bit integers as strings); values
 * above max are clamped to it. -1 when v is neither. */
static int get_uint(const json_t *v, uint64_t max, uint64_t *out) {
  if (json_is_number(v)) {
    double d = json_number_value(v);
    if (!(d >= 0) || isinf(d) || !integral(d))
      return -1;
    *out = d >= (double)max ? max : (uint64_t)d;
    return 0;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    uint64_t x = 0;
    if (!*s)
      return -1;
    for (; *s; s++) {
      if (*s < '0' || *s > '9')
        return -1;
      x = x > (UINT64_MAX - 9) / 10 ? UINT64_MAX
                                    : x * 10 + (uint64_t)(*s - '0');
    }
    *out = x > max ? max : x;
    return 0;
  }
  return -1;
}

/* A proto3 JSON Duration: "-"? digits ("." 1..9 digits)? "s", within
 * +-315576000000 s. *ms is rounded up, so that a positive duration stays
 * positive; *neg is set for a negative non-zero one. -1 when malformed. */
static int get_duration(const json_t *v, int *neg, uint64_t *ms) {
  if (!json_is_string(v))
    return -1;
  const char *s = json_string_value(v);
  int minus = *s == '-';
  s += minus;
  uint64_t sec = 0, nanos = 0;
  int digits = 0;
  for (; *s >= '0' && *s <= '9'; s++, digits++) {
    sec = sec * 10 + (uint64_t)(*s - '0');
    if (sec > DURATION_MAX_S)
      return -1;
  }
  if (!digits)
    return -1;
  if (*s == '.') {
    s++;
    int f = 0;
    for (; *s >= '0' && *s <= '9'; s++, f++) {
      if (f == 9)
        return -1;
      nanos = nanos * 10 + (uint64_t)(*s - '0');
    }
    if (!f)
      return -1;
    for (; f < 9; f++)
      nanos *= 10;
  }
  if (s[0] != 's' || s[1] != 0)
    return -1;
  *neg = minus && (sec || nanos);
  *ms = sec * 1000 + (nanos + 999999) / 1000000;
  return 0;
}

/* One status code: a name (any case) or its number. */
static int get_code(const json_t *v, unsigned *code) {
  if (json_is_number(v)) {
    double d = json_number_value(v);
    if (!(d >= 0 && d <= 16) || !integral(d))
      return -1;
    *code = (unsigned)d;
    return 0;
  }
  if (!json_is_string(v))
    return -1;
  for (unsigned c = 0; c <= 16; c++)
    if (strcasecmp(json_string_value(v),
                   sluice_status_name((sluice_status_code)c)) == 0) {
      *code = c;
      return 0;
    }
  return -1;
}

static int get_codes(jctx *j, const json_t *v, const char *field, int non_empty,
                     uint32_t *out) {
  char what[96];
  if (!json_is_array(v) || (non_empty && json_array_size(v) == 0))
    return jfail(j, field,
                 non_empty ? "must be a non-empty list of status codes "
                             "(\"UNAVAILABLE\" or 14)"
                           : "must be a list of status codes "
                             "(\"UNAVAILABLE\" or 14)");
  uint32_t bits = 0;
  size_t i;
  const json_t *c;
  json_array_foreach(v, i, c) {
    unsigned code;
    snprintf(what, sizeof what, "%s[%zu]", field, i);
    if (get_code(c, &code) != 0)
      return jfail(j, what,
                   "not a status code (a name like \"UNAVAILABLE\" or a "
                   "number 1..16)");
    if (code == SLUICE_STATUS_OK)
      return jfail(j, what, "OK cannot be listed");
    bits |= SLUICE_CODE_BIT(code);
  }
  *out = bits;
  return 0;
}

static uint32_t clamp32(uint64_t u) {
  return u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
}

/* A policy's maxAttempts: an integer > 1, kept whole (clamped to the cap
 * per call, not here). */
static int get_attempts(jctx *j, const json_t *o, uint32_t *out) {
  json_t *v = json_object_get(o, "maxAttempts");
  uint64_t u;
  if (!v || get_uint(v, UINT32_MAX, &u) != 0 || u < 2)
    return jfail(j, "maxAttempts", "must be an integer > 1");
  *out = (uint32_t)u;
  return 0;
}

/* A required duration > 0, in ms. */
static int get_backoff(jctx *j, const json_t *o, const char *field,
                       uint32_t *out) {
  json_t *v = json_object_get(o, field);
  uint64_t u;
  int neg;
  if (!v || get_duration(v, &neg, &u) != 0 || neg || !u)
    return jfail(j, field, "must be a positive duration like \"0.1s\"");
  *out = clamp32(u);
  return 0;
}

static int parse_retry(jctx *j, const json_t *o, sluice_retry_policy *p) {
  int rv;
  if (!json_is_object(o))
    return jfail(j, "", "must be an object");
  if ((rv = get_attempts(j, o, &p->max_attempts)) ||
      (rv = get_backoff(j, o, "initialBackoff", &p->initial_backoff_ms)) ||
      (rv = get_backoff(j, o, "maxBackoff", &p->max_backoff_ms)))
    return rv;
  json_t *v = json_object_get(o, "backoffMultiplier");
  if (!json_is_number(v) || !(json_number_value(v) > 0))
    return jfail(j, "backoffMultiplier", "must be a number > 0");
  p->backoff_multiplier = json_number_value(v);
  return get_codes(j, json_object_get(o, "retryableStatusCodes"),
                   "retryableStatusCodes", 1, &p->retryable_codes);
}

static int parse_hedging(jctx *j, const json_t *o, sluice_hedging_policy *p) {
  json_t *v;
  uint64_t u;
  int neg, rv;
  if (!json_is_object(o))
    return jfail(j, "", "must be an object");
  if ((rv = get_attempts(j, o, &p->max_attempts)))
    return rv;
  p->hedging_delay_ms = 0;
  if ((v = json_object_get(o, "hedgingDelay")) && !json_is_null(v)) {
    if (get_duration(v, &neg, &u) != 0 || neg)
      return jfail(j, "hedgingDelay", "must be a duration >= 0 like \"0.05s\"");
    p->hedging_delay_ms = clamp32(u);
  }
  p->non_fatal_codes = 0;
  if ((v = json_object_get(o, "nonFatalStatusCodes")) && !json_is_null(v))
    return get_codes(j, v, "nonFatalStatusCodes", 0, &p->non_fatal_codes);
  return 0;
}

/* A message size limit: an integer > 0, as a number or a string. */
static int parse_size(jctx *j, const json_t *o, const char *field,
                      uint32_t *out) {
  json_t *v = json_object_get(o, field);
  uint64_t u;
  if (!v || json_is_null(v))
    return 0;
  /* 0 is "unset" in sluice_method_config, so it cannot mean "nothing
   * fits" as it would in gRPC: refused rather than silently dropped. */
  if (get_uint(v, UINT32_MAX, &u) != 0 || !u)
    return jfail(j, field,
                 "must be an integer > 0 (a number or a string of digits)");
  *out = (uint32_t)u;
  return 0;
}

static int parse_mc_fields(jctx *j, const json_t *o, sluice_method_config *mc) {
  json_t *v;
  uint64_t u;
  int neg, rv;
  size_t len = strlen(j->path);
  sluice_method_config_init(mc);
  if ((v = json_object_get(o, "timeout")) && !json_is_null(v)) {
    /* "0s" is no timeout, as in C-core */
    if (get_duration(v, &neg, &u) != 0 || neg)
      return jfail(j, "timeout", "must be a duration >= 0 like \"1.5s\"");
    mc->timeout_ms = u;
  }
  if ((v = json_object_get(o, "waitForReady")) && !json_is_null(v)) {
    if (!json_is_boolean(v))
      return jfail(j, "waitForReady", "must be true or false");
    mc->wait_for_ready = json_is_true(v);
  }
  if ((rv = parse_size(j, o, "maxRequestMessageBytes",
                       &mc->max_request_bytes)) ||
      (rv = parse_size(j, o, "maxResponseMessageBytes",
                       &mc->max_response_bytes)))
    return rv;
  json_t *r = json_object_get(o, "retryPolicy");
  json_t *h = json_object_get(o, "hedgingPolicy");
  if (r && !json_is_null(r) && h && !json_is_null(h))
    return jfail(j, "retryPolicy", "cannot be set together with hedgingPolicy");
  if (r && !json_is_null(r)) {
    snprintf(j->path + len, sizeof j->path - len, ".retryPolicy");
    if ((rv = parse_retry(j, r, &mc->retry)))
      return rv;
    mc->has_retry = 1;
  }
  if (h && !json_is_null(h)) {
    snprintf(j->path + len, sizeof j->path - len, ".hedgingPolicy");
    if ((rv = parse_hedging(j, h, &mc->hedging)))
      return rv;
    mc->has_hedging = 1;
  }
  j->path[len] = 0;
  return 0;
}

/* A name's optional string field: absent, null and "" are the same. */
static int name_part(jctx *j, const json_t *n, const char *field,
                     const char **out) {
  json_t *v = json_object_get(n, field);
  *out = "";
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_string(v))
    return jfail(j, field, "must be a string");
  *out = json_string_value(v);
  return 0;
}

static int add_names(jctx *j, const json_t *names,
                     const sluice_method_config *mc, sluice__svc_config *c) {
  size_t len = strlen(j->path), i;
  const json_t *n;
  int rv;
  if (!names || json_is_null(names))
    return 0; /* a config named for nothing applies to nothing */
  if (!json_is_array(names))
    return jfail(j, "name", "must be a list of {\"service\", \"method\"}");
  json_array_foreach(names, i, n) {
    const char *svc, *meth;
    snprintf(j->path + len, sizeof j->path - len, ".name[%zu]", i);
    if (!json_is_object(n))
      return jfail(j, "", "must be an object {\"service\", \"method\"}");
    if ((rv = name_part(j, n, "service", &svc)) ||
        (rv = name_part(j, n, "method", &meth)))
      return rv;
    if (!*svc && *meth)
      return jfail(j, "method", "needs a service");
    if (strchr(svc, '/') || strchr(meth, '/'))
      return jfail(j, "", "service and method cannot contain '/'");
    if (entry_index(c, svc, meth) >= 0)
      return fail(j->err, j->errlen, "%s: duplicate name \"%s%s%s\"", j->path,
                  svc, *meth ? "/" : "", meth);
    if ((rv = entry_add(c, sluice__strdup(svc), sluice__strdup(meth), mc)))
      return rv;
  }
  j->path[len] = 0;
  return 0;
}

static int parse_method_configs(jctx *j, const json_t *list,
                                sluice__svc_config *c) {
  size_t i;
  const json_t *m;
  int rv;
  if (!json_is_array(list))
    return jfail(j, "methodConfig", "must be a list");
  json_array_foreach(list, i, m) {
    sluice_method_config mc;
    snprintf(j->path, sizeof j->path, "methodConfig[%zu]", i);
    if (!json_is_object(m))
      return jfail(j, "", "must be an object");
    if ((rv = parse_mc_fields(j, m, &mc)) ||
        (rv = add_names(j, json_object_get(m, "name"), &mc, c)))
      return rv;
  }
  j->path[0] = 0;
  return 0;
}

static int parse_throttling(jctx *j, const json_t *o, sluice__svc_config *c) {
  uint64_t u;
  snprintf(j->path, sizeof j->path, "retryThrottling");
  if (!json_is_object(o))
    return jfail(j, "", "must be an object");
  json_t *v = json_object_get(o, "maxTokens");
  /* clamped one past the range so that a huge value is refused, not
   * clamped into it */
  if (!v || get_uint(v, 1001, &u) != 0 || u < 1 || u > 1000)
    return jfail(j, "maxTokens", "must be an integer in 1..1000");
  v = json_object_get(o, "tokenRatio");
  uint32_t milli =
      json_is_number(v) ? sluice__token_ratio_milli(json_number_value(v)) : 0;
  if (!milli)
    return jfail(j, "tokenRatio",
                 "must be a number >= 0.001 (three decimals are kept)");
  c->throttle_max_tokens = (uint32_t)u;
  c->throttle_ratio_milli = milli;
  j->path[0] = 0;
  return 0;
}

/* gRPC's policy names and sluice's own, with the strategy each maps to;
 * icase for the deprecated loadBalancingPolicy, whose names are
 * case-insensitive.
 * pick_first has no sluice equivalent: rr is the closest that keeps every
 * destination in use and the config valid. */
static const char *lb_map(const char *name, int icase) {
  static const struct {
    const char *grpc, *ours;
  } map[] = {{"round_robin", "rr"},
             {"pick_first", "rr"},
             {"least_request", "lcc"},
             {"least_request_experimental", "lcc"},
             {"rr", "rr"},
             {"lcc", "lcc"},
             {"bcc", "bcc"},
             {"btc", "btc"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if ((icase ? strcasecmp : strcmp)(map[i].grpc, name) == 0)
      return map[i].ours;
  return NULL;
}

#define LB_KNOWN "round_robin, pick_first, least_request, rr, lcc, bcc or btc"

static int parse_lb(jctx *j, const json_t *list, sluice__svc_config *c) {
  size_t i;
  const json_t *e;
  if (!json_is_array(list))
    return jfail(j, "loadBalancingConfig",
                 "must be a list of {\"policy_name\": {...}}");
  json_array_foreach(list, i, e) {
    snprintf(j->path, sizeof j->path, "loadBalancingConfig[%zu]", i);
    if (!json_is_object(e) || json_object_size(e) != 1)
      return jfail(j, "", "must be an object with exactly one policy name");
    const char *key = json_object_iter_key(json_object_iter((json_t *)e));
    const char *ours = lb_map(key, 0);
    if (ours) {
      c->lb_name = ours;
      j->path[0] = 0;
      return 0;
    }
  }
  j->path[0] = 0;
  return jfail(j, "loadBalancingConfig",
               "names no policy sluice knows (" LB_KNOWN ")");
}

static int parse_health(jctx *j, const json_t *o, sluice__svc_config *c) {
  if (!json_is_object(o))
    return jfail(j, "healthCheckConfig", "must be an object");
  json_t *v = json_object_get(o, "serviceName");
  if (v && !json_is_null(v)) {
    if (!json_is_string(v))
      return jfail(j, "healthCheckConfig.serviceName", "must be a string");
    if (!(c->health_service = sluice__strdup(json_string_value(v))))
      return SLUICE_ERR_NOMEM;
  }
  c->have_health = 1;
  return 0;
}

static int parse_root(jctx *j, const json_t *root, sluice__svc_config *c) {
  json_t *v;
  int rv;
  if (!json_is_object(root))
    return fail(j->err, j->errlen, "service config: must be a JSON object");
  if ((v = json_object_get(root, "methodConfig")) && !json_is_null(v) &&
      (rv = parse_method_configs(j, v, c)))
    return rv;
  if ((v = json_object_get(root, "retryThrottling")) && !json_is_null(v) &&
      (rv = parse_throttling(j, v, c)))
    return rv;
  if ((v = json_object_get(root, "loadBalancingConfig")) && !json_is_null(v)) {
    if ((rv = parse_lb(j, v, c)))
      return rv;
  } else if ((v = json_object_get(root, "loadBalancingPolicy")) &&
             !json_is_null(v)) {
    /* the deprecated field, read only without loadBalancingConfig, as
     * gRPC does; its names are case-insensitive */
    if (!json_is_string(v) || !(c->lb_name = lb_map(json_string_value(v), 1)))
      return jfail(j, "loadBalancingPolicy",
                   "must name a policy sluice knows (" LB_KNOWN ")");
  }
  if ((v = json_object_get(root, "healthCheckConfig")) && !json_is_null(v) &&
      (rv = parse_health(j, v, c)))
    return rv;
  return 0;
}

int sluice__svc_config_parse(sluice__svc_config *out, const char *json,
                             char *err, size_t errlen) {
  if (!out || !json)
    return fail(err, errlen, "service config: NULL");
  json_error_t jerr;
  /* Duplicate keys are an error in gRPC's parser too; numbers are read as
   * doubles so that an integer too large for json_int_t is clamped by the
   * field's rule instead of failing the whole document. */
  json_t *root = json_loads(
      json, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY,
      &jerr);
  if (!root)
    return fail(err, errlen,
                "service config: invalid JSON at line %d, column %d: %s",
                jerr.line, jerr.column, jerr.text);
  jctx j = {err, errlen, ""};
  sluice__svc_config c;
  memset(&c, 0, sizeof c);
  int rv = parse_root(&j, root, &c);
  json_decref(root);
  if (rv) {
    if (rv == SLUICE_ERR_NOMEM)
      fail(err, errlen, "service config: out of memory");
    sluice__svc_config_clear(&c);
    return rv;
  }
  *out = c;
  return 0;
}
