/* The service config JSON parser (client/service_config.h): the input is
 * the JSON text.
 * Invariants: an invalid config is refused with SLUICE_ERR_INVALID_ARG, a
 * non-empty error text and *out untouched; a valid one passes the typed
 * checks entry by entry, re-applies through the typed setters
 * (sluice__svc_config_set, _set_throttling) without error into the same
 * lookups, copies equal, and, written back as JSON by this harness, parses
 * to the same config (so nothing the parser accepts is lost or changed by
 * its own rules on a second pass). */
#include "fuzz.h"

#include <stdarg.h>

#include "client/service_config.h"

/* ---- a growing string */

typedef struct sbuf {
  char *p;
  size_t len, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  if (!b->p) { /* vsnprintf may not be handed NULL + 0 */
    b->cap = 256;
    b->p = malloc(b->cap);
    FUZZ_CHECK(b->p != NULL);
  }
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    FUZZ_CHECK(n >= 0);
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    b->cap = (b->cap + (size_t)n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    FUZZ_CHECK(b->p != NULL);
  }
}

/* A JSON string: jansson gave us valid UTF-8 without NULs, so only quotes,
 * backslashes and control characters need escaping. */
static void put_str(sbuf *b, const char *s) {
  put(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      put(b, "\\%c", c);
    else if (c < 0x20)
      put(b, "\\u%04x", c);
    else
      put(b, "%c", c);
  }
  put(b, "\"");
}

static void put_ms(sbuf *b, uint64_t ms) {
  put(b, "\"%llu.%03llus\"", (unsigned long long)(ms / 1000),
      (unsigned long long)(ms % 1000));
}

static void put_codes(sbuf *b, uint32_t codes) {
  put(b, "[");
  const char *sep = "";
  for (unsigned c = 0; c < 32; c++)
    if (codes & (1u << c)) {
      put(b, "%s%u", sep, c);
      sep = ",";
    }
  put(b, "]");
}

static void put_mc(sbuf *b, const sluice__mc_entry *e) {
  const sluice_method_config *mc = &e->mc;
  put(b, "{\"name\":[{\"service\":");
  put_str(b, e->service);
  put(b, ",\"method\":");
  put_str(b, e->method);
  put(b, "}]");
  if (mc->timeout_ms) {
    put(b, ",\"timeout\":");
    put_ms(b, mc->timeout_ms);
  }
  if (mc->wait_for_ready != -1)
    put(b, ",\"waitForReady\":%s", mc->wait_for_ready ? "true" : "false");
  if (mc->max_request_bytes)
    put(b, ",\"maxRequestMessageBytes\":%u", mc->max_request_bytes);
  if (mc->max_response_bytes)
    put(b, ",\"maxResponseMessageBytes\":\"%u\"", mc->max_response_bytes);
  if (mc->has_retry) {
    const sluice_retry_policy *p = &mc->retry;
    put(b, ",\"retryPolicy\":{\"maxAttempts\":%u,\"initialBackoff\":",
        p->max_attempts);
    put_ms(b, p->initial_backoff_ms);
    put(b, ",\"maxBackoff\":");
    put_ms(b, p->max_backoff_ms);
    put(b, ",\"backoffMultiplier\":%.17g,\"retryableStatusCodes\":",
        p->backoff_multiplier);
    put_codes(b, p->retryable_codes);
    put(b, "}");
  }
  if (mc->has_hedging) {
    const sluice_hedging_policy *p = &mc->hedging;
    put(b, ",\"hedgingPolicy\":{\"maxAttempts\":%u,\"hedgingDelay\":",
        p->max_attempts);
    put_ms(b, p->hedging_delay_ms);
    put(b, ",\"nonFatalStatusCodes\":");
    put_codes(b, p->non_fatal_codes);
    put(b, "}");
  }
  put(b, "}");
}

static char *to_json(const sluice__svc_config *c) {
  sbuf b = {NULL, 0, 0};
  put(&b, "{\"methodConfig\":[");
  for (size_t i = 0; i < c->n; i++) {
    if (i)
      put(&b, ",");
    put_mc(&b, &c->entries[i]);
  }
  put(&b, "]");
  if (c->throttle_max_tokens)
    put(&b, ",\"retryThrottling\":{\"maxTokens\":%u,\"tokenRatio\":%u.%03u}",
        c->throttle_max_tokens, c->throttle_ratio_milli / 1000,
        c->throttle_ratio_milli % 1000);
  if (c->lb_name)
    put(&b, ",\"loadBalancingConfig\":[{\"%s\":{}}]", c->lb_name);
  if (c->have_health) {
    put(&b, ",\"healthCheckConfig\":{");
    if (c->health_service) {
      put(&b, "\"serviceName\":");
      put_str(&b, c->health_service);
    }
    put(&b, "}");
  }
  put(&b, "}");
  return b.p;
}

/* ---- comparisons, field by field (structs have padding) */

static void check_mc_equal(const sluice_method_config *a,
                           const sluice_method_config *b) {
  FUZZ_CHECK(a->timeout_ms == b->timeout_ms);
  FUZZ_CHECK(a->wait_for_ready == b->wait_for_ready);
  FUZZ_CHECK(a->max_request_bytes == b->max_request_bytes);
  FUZZ_CHECK(a->max_response_bytes == b->max_response_bytes);
  FUZZ_CHECK(a->has_retry == b->has_retry);
  FUZZ_CHECK(a->has_hedging == b->has_hedging);
  if (a->has_retry) {
    FUZZ_CHECK(a->retry.max_attempts == b->retry.max_attempts);
    FUZZ_CHECK(a->retry.initial_backoff_ms == b->retry.initial_backoff_ms);
    FUZZ_CHECK(a->retry.max_backoff_ms == b->retry.max_backoff_ms);
    FUZZ_CHECK(memcmp(&a->retry.backoff_multiplier,
                      &b->retry.backoff_multiplier, sizeof(double)) == 0);
    FUZZ_CHECK(a->retry.retryable_codes == b->retry.retryable_codes);
  }
  if (a->has_hedging) {
    FUZZ_CHECK(a->hedging.max_attempts == b->hedging.max_attempts);
    FUZZ_CHECK(a->hedging.hedging_delay_ms == b->hedging.hedging_delay_ms);
    FUZZ_CHECK(a->hedging.non_fatal_codes == b->hedging.non_fatal_codes);
  }
}

static void check_equal(const sluice__svc_config *a,
                        const sluice__svc_config *b) {
  FUZZ_CHECK(a->n == b->n);
  for (size_t i = 0; i < a->n; i++) {
    FUZZ_CHECK(strcmp(a->entries[i].service, b->entries[i].service) == 0);
    FUZZ_CHECK(strcmp(a->entries[i].method, b->entries[i].method) == 0);
    check_mc_equal(&a->entries[i].mc, &b->entries[i].mc);
  }
  FUZZ_CHECK(a->throttle_max_tokens == b->throttle_max_tokens);
  FUZZ_CHECK(a->throttle_ratio_milli == b->throttle_ratio_milli);
  FUZZ_CHECK(a->lb_name == b->lb_name ||
             (a->lb_name && b->lb_name && !strcmp(a->lb_name, b->lb_name)));
  FUZZ_CHECK(a->have_health == b->have_health);
  FUZZ_CHECK((a->health_service == NULL) == (b->health_service == NULL));
  if (a->health_service)
    FUZZ_CHECK(strcmp(a->health_service, b->health_service) == 0);
}

/* "svc/method", "svc" or "": the name the typed setter takes. */
static char *entry_name(const sluice__mc_entry *e) {
  sbuf b = {NULL, 0, 0};
  put(&b, "%s%s%s", e->service, e->method[0] ? "/" : "", e->method);
  return b.p;
}

static void check_valid(const sluice__svc_config *c) {
  char err[256];
  FUZZ_CHECK(c->lb_name == NULL || !strcmp(c->lb_name, "rr") ||
             !strcmp(c->lb_name, "lcc") || !strcmp(c->lb_name, "bcc") ||
             !strcmp(c->lb_name, "btc"));
  FUZZ_CHECK(c->health_service == NULL || c->have_health);

  /* The typed setters accept every entry, and the lookups find them. */
  sluice__svc_config typed;
  memset(&typed, 0, sizeof typed);
  for (size_t i = 0; i < c->n; i++) {
    const sluice__mc_entry *e = &c->entries[i];
    err[0] = 0;
    FUZZ_CHECK(sluice__method_config_check(&e->mc, err, sizeof err) == 0);
    char *name = entry_name(e);
    int rv = sluice__svc_config_set(&typed, name, &e->mc, err, sizeof err);
    if (rv != 0)
      fprintf(stderr, "re-apply of \"%s\": %s\n", name, err);
    FUZZ_CHECK(rv == 0);
    free(name);
  }
  FUZZ_CHECK(typed.n == c->n);
  FUZZ_CHECK(sluice__svc_config_set_throttling(&typed, c->throttle_max_tokens,
                                               c->throttle_ratio_milli) == 0);
  for (size_t i = 0; i < c->n; i++) {
    const sluice__mc_entry *e = &c->entries[i];
    if (!e->method[0])
      continue; /* a method of its own may override a service entry */
    char *name = entry_name(e);
    const sluice_method_config *found = sluice__svc_config_find(c, name);
    FUZZ_CHECK(found == &e->mc);
    found = sluice__svc_config_find(&typed, name);
    FUZZ_CHECK(found != NULL);
    check_mc_equal(found, &e->mc);
    free(name);
  }
  sluice__svc_config_clear(&typed);

  sluice__svc_config copy;
  FUZZ_CHECK(sluice__svc_config_copy(&copy, c) == 0);
  check_equal(c, &copy);
  sluice__svc_config_clear(&copy);

  /* Written back and parsed again: the same config. */
  char *json = to_json(c);
  sluice__svc_config again;
  memset(&again, 0, sizeof again);
  err[0] = 0;
  int rv = sluice__svc_config_parse(&again, json, err, sizeof err);
  if (rv != 0)
    fprintf(stderr, "re-parse of %s: %s\n", json, err);
  FUZZ_CHECK(rv == 0);
  check_equal(c, &again);
  sluice__svc_config_clear(&again);
  free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* jansson reads a C string: the input up to its first NUL. */
  char *json = (char *)fuzz_dup(NULL, size + 1);
  memcpy(json, data, size);
  json[size] = '\0';
  sluice__svc_config c;
  memset(&c, 0xA5, sizeof c);
  char err[256];
  err[0] = '\0';
  int rv = sluice__svc_config_parse(&c, json, err, sizeof err);
  if (rv == 0) {
    check_valid(&c);
    sluice__svc_config_clear(&c);
  } else {
    FUZZ_CHECK(rv == SLUICE_ERR_INVALID_ARG);
    FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', sizeof err) != NULL);
    /* *out untouched. */
    unsigned char *p = (unsigned char *)&c;
    for (size_t i = 0; i < sizeof c; i++)
      FUZZ_CHECK(p[i] == 0xA5);
  }
  free(json);
  return 0;
}
