/* The service config (runtime/client/service_config.c) and the resilience
 * setters of sluice/resilience.h (channel_opts.c): gRPC service config JSON
 * parsed into typed method configs, name precedence (method > service >
 * default), every refusal with the text that names the field, the typed
 * checks, nothing half-applied on an error, the strategy a config names,
 * the throttling ratio in thousandths, the options' deep copy, and
 * malformed input (truncated, mutated, wrong types, huge numbers) that must
 * be refused without a crash or a leak (run under ASan in make test). */
#define _GNU_SOURCE /* uv.h (channel_int.h) needs pthread_rwlock_t under       \
                       -std=c11 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/channel.h>
#include <sluice/resilience.h>

#include "client/channel_int.h"
#include "client/service_config.h"
#include "lb/lb.h"

#define U(c) SLUICE_CODE_BIT(SLUICE_STATUS_##c)

static char err[256];

/* Parses json, which must be valid; the caller clears *c. */
static void parse_ok(sluice__svc_config *c, const char *json) {
  memset(c, 0, sizeof *c);
  err[0] = 0;
  int rv = sluice__svc_config_parse(c, json, err, sizeof err);
  if (rv != 0)
    fail_msg("refused (%d): %s\n  json: %s", rv, err, json);
}

/* json must be refused with exactly want as the error, and *out left as
 * it was. */
static void parse_bad(const char *json, const char *want) {
  sluice__svc_config c, before;
  memset(&c, 0x5a, sizeof c);
  memcpy(&before, &c, sizeof c);
  err[0] = 0;
  int rv = sluice__svc_config_parse(&c, json, err, sizeof err);
  if (rv != SLUICE_ERR_INVALID_ARG)
    fail_msg("accepted (%d): %s", rv, json);
  assert_memory_equal(&c, &before, sizeof c);
  if (want && strcmp(err, want) != 0)
    fail_msg("error text\n  got:  %s\n  want: %s\n  json: %s", err, want, json);
}

static const char *A6_EXAMPLE =
    "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\",\"method\":\"M\"}"
    "],\"retryPolicy\":{\"maxAttempts\":4,\"initialBackoff\":\"0.1s\","
    "\"maxBackoff\":\"1s\",\"backoffMultiplier\":2,\"retryableStatusCodes\":"
    "[\"UNAVAILABLE\"]}}],\"retryThrottling\":{\"maxTokens\":10,"
    "\"tokenRatio\":0.1}}";

static void valid_a6_example(void **state) {
  (void)state;
  sluice__svc_config c;
  parse_ok(&c, A6_EXAMPLE);
  assert_int_equal(c.n, 1);
  assert_string_equal(c.entries[0].service, "pkg.Svc");
  assert_string_equal(c.entries[0].method, "M");
  const sluice_method_config *mc = &c.entries[0].mc;
  assert_int_equal(mc->timeout_ms, 0);
  assert_int_equal(mc->wait_for_ready, -1);
  assert_int_equal(mc->max_request_bytes, 0);
  assert_int_equal(mc->max_response_bytes, 0);
  assert_true(mc->has_retry);
  assert_false(mc->has_hedging);
  assert_int_equal(mc->retry.max_attempts, 4);
  assert_int_equal(mc->retry.initial_backoff_ms, 100);
  assert_int_equal(mc->retry.max_backoff_ms, 1000);
  assert_true(mc->retry.backoff_multiplier == 2.0);
  assert_int_equal(mc->retry.retryable_codes, U(UNAVAILABLE));
  assert_int_equal(c.throttle_max_tokens, 10);
  assert_int_equal(c.throttle_ratio_milli, 100);
  assert_null(c.lb_name);
  assert_false(c.have_health);
  assert_null(c.health_service);
  sluice__svc_config_clear(&c);
  sluice__svc_config_clear(&c); /* idempotent */
  assert_int_equal(c.n, 0);
}

static void valid_every_field(void **state) {
  (void)state;
  sluice__svc_config c;
  parse_ok(&c, "{\"methodConfig\":[{"
               "\"name\":[{\"service\":\"a.S\"},{\"service\":\"b.S\","
               "\"method\":\"Get\"}],"
               "\"timeout\":\"1.5s\",\"waitForReady\":true,"
               "\"maxRequestMessageBytes\":1024,"
               "\"maxResponseMessageBytes\":\"4194304\","
               "\"hedgingPolicy\":{\"maxAttempts\":3,\"hedgingDelay\":"
               "\"0.05s\",\"nonFatalStatusCodes\":[\"unavailable\",13]},"
               "\"somethingNew\":{\"x\":1}}],"
               "\"loadBalancingConfig\":[{\"round_robin\":{}}],"
               "\"healthCheckConfig\":{\"serviceName\":\"health.svc\"},"
               "\"unknownTopLevel\":[1,2,3]}");
  assert_int_equal(c.n, 2);
  for (size_t i = 0; i < 2; i++) {
    const sluice_method_config *mc = &c.entries[i].mc;
    assert_int_equal(mc->timeout_ms, 1500);
    assert_int_equal(mc->wait_for_ready, 1);
    assert_int_equal(mc->max_request_bytes, 1024);
    assert_int_equal(mc->max_response_bytes, 4194304);
    assert_false(mc->has_retry);
    assert_true(mc->has_hedging);
    assert_int_equal(mc->hedging.max_attempts, 3);
    assert_int_equal(mc->hedging.hedging_delay_ms, 50);
    assert_int_equal(mc->hedging.non_fatal_codes, U(UNAVAILABLE) | U(INTERNAL));
  }
  assert_string_equal(c.entries[0].service, "a.S");
  assert_string_equal(c.entries[0].method, "");
  assert_string_equal(c.entries[1].method, "Get");
  assert_string_equal(c.lb_name, "rr");
  assert_true(c.have_health);
  assert_string_equal(c.health_service, "health.svc");
  sluice__svc_config_clear(&c);

  /* hedging defaults; waitForReady false; "0s" timeout is none (C-core) */
  parse_ok(&c, "{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"0s\","
               "\"waitForReady\":false,"
               "\"hedgingPolicy\":{\"maxAttempts\":2}}],"
               "\"healthCheckConfig\":{}}");
  assert_int_equal(c.entries[0].mc.timeout_ms, 0);
  assert_int_equal(c.entries[0].mc.wait_for_ready, 0);
  assert_int_equal(c.entries[0].mc.hedging.hedging_delay_ms, 0);
  assert_int_equal(c.entries[0].mc.hedging.non_fatal_codes, 0);
  assert_true(c.have_health);
  assert_null(c.health_service);
  sluice__svc_config_clear(&c);

  /* empty things */
  parse_ok(&c, "{}");
  assert_int_equal(c.n, 0);
  sluice__svc_config_clear(&c);
  parse_ok(&c, "{\"methodConfig\":[]}");
  sluice__svc_config_clear(&c);
  /* a methodConfig without names is checked but applies to nothing */
  parse_ok(&c, "{\"methodConfig\":[{\"timeout\":\"1s\"}]}");
  assert_int_equal(c.n, 0);
  sluice__svc_config_clear(&c);
  /* null fields are absent fields */
  parse_ok(&c, "{\"methodConfig\":[{\"name\":[{\"service\":null,"
               "\"method\":null}],\"retryPolicy\":null,\"timeout\":null}],"
               "\"retryThrottling\":null,\"loadBalancingConfig\":null}");
  assert_int_equal(c.n, 1);
  assert_string_equal(c.entries[0].service, "");
  assert_false(c.entries[0].mc.has_retry);
  sluice__svc_config_clear(&c);
}

static void durations_and_numbers(void **state) {
  (void)state;
  static const struct {
    const char *timeout;
    uint64_t ms;
  } d[] = {{"1s", 1000},
           {"1.5s", 1500},
           {"0.001s", 1},
           {"0.0001s", 1}, /* rounded up: a positive duration stays so */
           {"0.000000001s", 1},
           {"2.000000000s", 2000},
           {"0.1234s", 124},
           {"315576000000s", UINT64_C(315576000000000)},
           {"-0s", 0}};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
    char json[200];
    snprintf(json, sizeof json,
             "{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"%s\"}]}",
             d[i].timeout);
    sluice__svc_config c;
    parse_ok(&c, json);
    assert_int_equal(c.entries[0].mc.timeout_ms, d[i].ms);
    sluice__svc_config_clear(&c);
  }
  static const char *bad[] = {"-1s",
                              "1",
                              "1.s",
                              ".5s",
                              "1.0000000001s",
                              "1 s",
                              "s",
                              "",
                              "1ms",
                              "315576000001s",
                              "+1s",
                              "1e3s",
                              "0x10s",
                              "1.5S",
                              "1s ",
                              "99999999999999999999999s"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char json[200];
    snprintf(json, sizeof json,
             "{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"%s\"}]}", bad[i]);
    parse_bad(json, "methodConfig[0].timeout: must be a duration >= 0 like "
                    "\"1.5s\"");
  }
  parse_bad("{\"methodConfig\":[{\"name\":[{}],\"timeout\":1.5}]}",
            "methodConfig[0].timeout: must be a duration >= 0 like \"1.5s\"");

  /* sizes: numbers or strings, clamped at 2^32-1 */
  static const struct {
    const char *v;
    uint32_t want;
  } sz[] = {{"1", 1},
            {"\"77\"", 77},
            {"4294967295", UINT32_MAX},
            {"4294967296", UINT32_MAX},
            {"1e30", UINT32_MAX},
            {"\"123456789012345678901234567890\"", UINT32_MAX},
            {"12345678901234567890123", UINT32_MAX},
            {"2.0", 2}};
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    char json[200];
    snprintf(json, sizeof json,
             "{\"methodConfig\":[{\"name\":[{}],"
             "\"maxRequestMessageBytes\":%s}]}",
             sz[i].v);
    sluice__svc_config c;
    parse_ok(&c, json);
    assert_int_equal(c.entries[0].mc.max_request_bytes, sz[i].want);
    sluice__svc_config_clear(&c);
  }
  static const char *badsz[] = {"0",      "-1",      "1.5",      "\"\"",
                                "\"-1\"", "\"1.0\"", "\"0x10\"", "true",
                                "null2",  "[1]"};
  for (size_t i = 0; i < sizeof badsz / sizeof badsz[0]; i++) {
    char json[200];
    snprintf(json, sizeof json,
             "{\"methodConfig\":[{\"name\":[{}],"
             "\"maxResponseMessageBytes\":%s}]}",
             badsz[i]);
    /* null2 is not JSON: a parse error, whose text names the place */
    parse_bad(json, strcmp(badsz[i], "null2") == 0
                        ? NULL
                        : "methodConfig[0].maxResponseMessageBytes: must be "
                          "an integer > 0 (a number or a string of digits)");
  }

  /* maxAttempts: absurd but valid values are kept for the cap to clamp */
  const char *fmt = "{\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":{"
                    "\"maxAttempts\":%s,\"initialBackoff\":\"1s\","
                    "\"maxBackoff\":\"1s\",\"backoffMultiplier\":1.5,"
                    "\"retryableStatusCodes\":[14]}}]}";
  static const struct {
    const char *v;
    uint32_t want;
  } ma[] = {{"2", 2},
            {"1000000000", 1000000000u},
            {"1e20", UINT32_MAX},
            {"\"5\"", 5}};
  for (size_t i = 0; i < sizeof ma / sizeof ma[0]; i++) {
    char json[400];
    snprintf(json, sizeof json, fmt, ma[i].v);
    sluice__svc_config c;
    parse_ok(&c, json);
    assert_int_equal(c.entries[0].mc.retry.max_attempts, ma[i].want);
    sluice__svc_config_clear(&c);
  }
  static const char *badma[] = {"0", "1", "-3", "2.5", "\"two\"", "true"};
  for (size_t i = 0; i < sizeof badma / sizeof badma[0]; i++) {
    char json[400];
    snprintf(json, sizeof json, fmt, badma[i]);
    parse_bad(json, "methodConfig[0].retryPolicy.maxAttempts: must be an "
                    "integer > 1");
  }
}

static void status_codes(void **state) {
  (void)state;
  const char *fmt = "{\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":{"
                    "\"maxAttempts\":3,\"initialBackoff\":\"1s\","
                    "\"maxBackoff\":\"1s\",\"backoffMultiplier\":1,"
                    "\"retryableStatusCodes\":%s}}]}";
  static const struct {
    const char *v;
    uint32_t want;
  } ok[] = {
      {"[\"UNAVAILABLE\"]", U(UNAVAILABLE)},
      {"[\"unavailable\",\"Resource_Exhausted\"]",
       U(UNAVAILABLE) | U(RESOURCE_EXHAUSTED)},
      {"[14,14,1,16]", U(UNAVAILABLE) | U(CANCELLED) | U(UNAUTHENTICATED)},
      {"[\"DATA_LOSS\",4]", U(DATA_LOSS) | U(DEADLINE_EXCEEDED)},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char json[400];
    snprintf(json, sizeof json, fmt, ok[i].v);
    sluice__svc_config c;
    parse_ok(&c, json);
    assert_int_equal(c.entries[0].mc.retry.retryable_codes, ok[i].want);
    sluice__svc_config_clear(&c);
  }
  static const struct {
    const char *v, *want;
  } bad[] = {
      {"[]", "methodConfig[0].retryPolicy.retryableStatusCodes: must be a "
             "non-empty list of status codes (\"UNAVAILABLE\" or 14)"},
      {"\"UNAVAILABLE\"",
       "methodConfig[0].retryPolicy.retryableStatusCodes: must be a "
       "non-empty list of status codes (\"UNAVAILABLE\" or 14)"},
      {"[\"UNAVAILABLE\",\"NOPE\"]",
       "methodConfig[0].retryPolicy.retryableStatusCodes[1]: not a status "
       "code (a name like \"UNAVAILABLE\" or a number 1..16)"},
      {"[17]", "methodConfig[0].retryPolicy.retryableStatusCodes[0]: not a "
               "status code (a name like \"UNAVAILABLE\" or a number 1..16)"},
      {"[-1]", "methodConfig[0].retryPolicy.retryableStatusCodes[0]: not a "
               "status code (a name like \"UNAVAILABLE\" or a number 1..16)"},
      {"[1.5]", "methodConfig[0].retryPolicy.retryableStatusCodes[0]: not a "
                "status code (a name like \"UNAVAILABLE\" or a number 1..16)"},
      {"[null]", "methodConfig[0].retryPolicy.retryableStatusCodes[0]: not a "
                 "status code (a name like \"UNAVAILABLE\" or a number "
                 "1..16)"},
      {"[\"OK\"]", "methodConfig[0].retryPolicy.retryableStatusCodes[0]: OK "
                   "cannot be listed"},
      {"[14,0]", "methodConfig[0].retryPolicy.retryableStatusCodes[1]: OK "
                 "cannot be listed"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char json[400];
    snprintf(json, sizeof json, fmt, bad[i].v);
    parse_bad(json, bad[i].want);
  }
  parse_bad("{\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{"
            "\"maxAttempts\":3,\"nonFatalStatusCodes\":[\"ok\"]}}]}",
            "methodConfig[0].hedgingPolicy.nonFatalStatusCodes[0]: OK cannot "
            "be listed");
  parse_bad("{\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{"
            "\"maxAttempts\":3,\"nonFatalStatusCodes\":{}}}]}",
            "methodConfig[0].hedgingPolicy.nonFatalStatusCodes: must be a "
            "list of status codes (\"UNAVAILABLE\" or 14)");
}

/* Every refusal of the parser, with the text that names the field. */
static void rejections(void **state) {
  (void)state;
#define RP(extra)                                                              \
  "{\"methodConfig\":[{\"name\":[{\"service\":\"s\"}]},{\"name\":[{}],"        \
  "\"retryPolicy\":{" extra "}}]}"
#define GOOD_BACKOFF                                                           \
  "\"initialBackoff\":\"0.1s\",\"maxBackoff\":\"1s\","                         \
  "\"backoffMultiplier\":2,\"retryableStatusCodes\":[14]"
  static const struct {
    const char *json, *want;
  } t[] = {
      /* the document */
      {"[]", "service config: must be a JSON object"},
      {"\"x\"", "service config: must be a JSON object"},
      {"{\"methodConfig\":{}}", "methodConfig: must be a list"},
      {"{\"methodConfig\":[1]}", "methodConfig[0]: must be an object"},
      /* names */
      {"{\"methodConfig\":[{\"name\":{}}]}",
       "methodConfig[0].name: must be a list of {\"service\", \"method\"}"},
      {"{\"methodConfig\":[{\"name\":[\"pkg.Svc\"]}]}",
       "methodConfig[0].name[0]: must be an object {\"service\", "
       "\"method\"}"},
      {"{\"methodConfig\":[{\"name\":[{\"service\":1}]}]}",
       "methodConfig[0].name[0].service: must be a string"},
      {"{\"methodConfig\":[{\"name\":[{\"service\":\"s\",\"method\":[]}]}]}",
       "methodConfig[0].name[0].method: must be a string"},
      {"{\"methodConfig\":[{\"name\":[{\"method\":\"M\"}]}]}",
       "methodConfig[0].name[0].method: needs a service"},
      {"{\"methodConfig\":[{\"name\":[{\"service\":\"a/b\"}]}]}",
       "methodConfig[0].name[0]: service and method cannot contain '/'"},
      {"{\"methodConfig\":[{\"name\":[{\"service\":\"s\",\"method\":\"M\"},"
       "{\"service\":\"s\",\"method\":\"M\"}]}]}",
       "methodConfig[0].name[1]: duplicate name \"s/M\""},
      {"{\"methodConfig\":[{\"name\":[{\"service\":\"s\"}]},"
       "{\"name\":[{\"service\":\"s\",\"method\":\"\"}]}]}",
       "methodConfig[1].name[0]: duplicate name \"s\""},
      {"{\"methodConfig\":[{\"name\":[{}]},{\"name\":[{\"service\":\"\"}]}]}",
       "methodConfig[1].name[0]: duplicate name \"\""},
      /* plain fields */
      {"{\"methodConfig\":[{\"name\":[{}],\"waitForReady\":1}]}",
       "methodConfig[0].waitForReady: must be true or false"},
      {"{\"methodConfig\":[{\"name\":[{}],\"waitForReady\":\"true\"}]}",
       "methodConfig[0].waitForReady: must be true or false"},
      {"{\"methodConfig\":[{\"name\":[{}],\"timeout\":\"-0.5s\"}]}",
       "methodConfig[0].timeout: must be a duration >= 0 like \"1.5s\""},
      /* retryPolicy */
      {"{\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":[]}]}",
       "methodConfig[0].retryPolicy: must be an object"},
      {RP(GOOD_BACKOFF), "methodConfig[1].retryPolicy.maxAttempts: must be "
                         "an integer > 1"},
      {RP("\"maxAttempts\":0," GOOD_BACKOFF),
       "methodConfig[1].retryPolicy.maxAttempts: must be an integer > 1"},
      {RP("\"maxAttempts\":3,\"maxBackoff\":\"1s\",\"backoffMultiplier\":2,"
          "\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.initialBackoff: must be a positive "
       "duration like \"0.1s\""},
      {RP("\"maxAttempts\":3,\"initialBackoff\":\"0s\",\"maxBackoff\":\"1s\","
          "\"backoffMultiplier\":2,\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.initialBackoff: must be a positive "
       "duration like \"0.1s\""},
      {RP("\"maxAttempts\":3,\"initialBackoff\":\"-1s\",\"maxBackoff\":\"1s\","
          "\"backoffMultiplier\":2,\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.initialBackoff: must be a positive "
       "duration like \"0.1s\""},
      {RP("\"maxAttempts\":3,\"initialBackoff\":0.1,\"maxBackoff\":\"1s\","
          "\"backoffMultiplier\":2,\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.initialBackoff: must be a positive "
       "duration like \"0.1s\""},
      {RP("\"maxAttempts\":3,\"initialBackoff\":\"1s\",\"maxBackoff\":\"-2s\","
          "\"backoffMultiplier\":2,\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.maxBackoff: must be a positive duration "
       "like \"0.1s\""},
      {RP("\"maxAttempts\":3,\"initialBackoff\":\"1s\",\"maxBackoff\":\"2s\","
          "\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.backoffMultiplier: must be a number > 0"},
      {RP("\"maxAttempts\":3,\"initialBackoff\":\"1s\",\"maxBackoff\":\"2s\","
          "\"backoffMultiplier\":0,\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.backoffMultiplier: must be a number > 0"},
      {RP("\"maxAttempts\":3,\"initialBackoff\":\"1s\",\"maxBackoff\":\"2s\","
          "\"backoffMultiplier\":\"2\",\"retryableStatusCodes\":[14]"),
       "methodConfig[1].retryPolicy.backoffMultiplier: must be a number > 0"},
      {RP("\"maxAttempts\":3,\"initialBackoff\":\"1s\",\"maxBackoff\":\"2s\","
          "\"backoffMultiplier\":2"),
       "methodConfig[1].retryPolicy.retryableStatusCodes: must be a "
       "non-empty list of status codes (\"UNAVAILABLE\" or 14)"},
      /* hedgingPolicy */
      {"{\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":1}]}",
       "methodConfig[0].hedgingPolicy: must be an object"},
      {"{\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{}}]}",
       "methodConfig[0].hedgingPolicy.maxAttempts: must be an integer > 1"},
      {"{\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{"
       "\"maxAttempts\":1}}]}",
       "methodConfig[0].hedgingPolicy.maxAttempts: must be an integer > 1"},
      {"{\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{"
       "\"maxAttempts\":2,\"hedgingDelay\":\"-1s\"}}]}",
       "methodConfig[0].hedgingPolicy.hedgingDelay: must be a duration >= 0 "
       "like \"0.05s\""},
      {"{\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":{},"
       "\"hedgingPolicy\":{}}]}",
       "methodConfig[0].retryPolicy: cannot be set together with "
       "hedgingPolicy"},
      /* retryThrottling */
      {"{\"retryThrottling\":[]}", "retryThrottling: must be an object"},
      {"{\"retryThrottling\":{\"tokenRatio\":0.1}}",
       "retryThrottling.maxTokens: must be an integer in 1..1000"},
      {"{\"retryThrottling\":{\"maxTokens\":0,\"tokenRatio\":0.1}}",
       "retryThrottling.maxTokens: must be an integer in 1..1000"},
      {"{\"retryThrottling\":{\"maxTokens\":1001,\"tokenRatio\":0.1}}",
       "retryThrottling.maxTokens: must be an integer in 1..1000"},
      {"{\"retryThrottling\":{\"maxTokens\":1e12,\"tokenRatio\":0.1}}",
       "retryThrottling.maxTokens: must be an integer in 1..1000"},
      {"{\"retryThrottling\":{\"maxTokens\":10.5,\"tokenRatio\":0.1}}",
       "retryThrottling.maxTokens: must be an integer in 1..1000"},
      {"{\"retryThrottling\":{\"maxTokens\":10}}",
       "retryThrottling.tokenRatio: must be a number >= 0.001 (three "
       "decimals are kept)"},
      {"{\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":0}}",
       "retryThrottling.tokenRatio: must be a number >= 0.001 (three "
       "decimals are kept)"},
      {"{\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":-1}}",
       "retryThrottling.tokenRatio: must be a number >= 0.001 (three "
       "decimals are kept)"},
      {"{\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":0.0009}}",
       "retryThrottling.tokenRatio: must be a number >= 0.001 (three "
       "decimals are kept)"},
      {"{\"retryThrottling\":{\"maxTokens\":10,\"tokenRatio\":\"0.5\"}}",
       "retryThrottling.tokenRatio: must be a number >= 0.001 (three "
       "decimals are kept)"},
      /* loadBalancingConfig */
      {"{\"loadBalancingConfig\":{\"round_robin\":{}}}",
       "loadBalancingConfig: must be a list of {\"policy_name\": {...}}"},
      {"{\"loadBalancingConfig\":[]}",
       "loadBalancingConfig: names no policy sluice knows (round_robin, "
       "pick_first, least_request, rr, lcc, bcc or btc)"},
      {"{\"loadBalancingConfig\":[{\"grpclb\":{}},{\"xds\":{}}]}",
       "loadBalancingConfig: names no policy sluice knows (round_robin, "
       "pick_first, least_request, rr, lcc, bcc or btc)"},
      {"{\"loadBalancingConfig\":[\"round_robin\"]}",
       "loadBalancingConfig[0]: must be an object with exactly one policy "
       "name"},
      {"{\"loadBalancingConfig\":[{\"rr\":{},\"lcc\":{}}]}",
       "loadBalancingConfig[0]: must be an object with exactly one policy "
       "name"},
      {"{\"loadBalancingConfig\":[{\"grpclb\":{}},{}]}",
       "loadBalancingConfig[1]: must be an object with exactly one policy "
       "name"},
      {"{\"loadBalancingPolicy\":\"grpclb\"}",
       "loadBalancingPolicy: must name a policy sluice knows (round_robin, "
       "pick_first, least_request, rr, lcc, bcc or btc)"},
      /* loadBalancingConfig's keys are case-sensitive; a long name is no
       * name */
      {"{\"loadBalancingConfig\":[{\"ROUND_ROBIN\":{}}]}",
       "loadBalancingConfig: names no policy sluice knows (round_robin, "
       "pick_first, least_request, rr, lcc, bcc or btc)"},
      {"{\"loadBalancingPolicy\":\"round_robin_round_robin_round_robin_x\"}",
       "loadBalancingPolicy: must name a policy sluice knows (round_robin, "
       "pick_first, least_request, rr, lcc, bcc or btc)"},
      {"{\"loadBalancingPolicy\":\"\"}",
       "loadBalancingPolicy: must name a policy sluice knows (round_robin, "
       "pick_first, least_request, rr, lcc, bcc or btc)"},
      {"{\"loadBalancingPolicy\":7}",
       "loadBalancingPolicy: must name a policy sluice knows (round_robin, "
       "pick_first, least_request, rr, lcc, bcc or btc)"},
      /* healthCheckConfig */
      {"{\"healthCheckConfig\":\"x\"}", "healthCheckConfig: must be an object"},
      {"{\"healthCheckConfig\":{\"serviceName\":5}}",
       "healthCheckConfig.serviceName: must be a string"},
      /* JSON itself */
      {"{\"retryThrottling\":{\"maxTokens\":1,\"maxTokens\":2,"
       "\"tokenRatio\":1}}",
       NULL},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    parse_bad(t[i].json, t[i].want);
  parse_bad("", NULL);
  assert_non_null(strstr(err, "service config: invalid JSON at line 1"));
  parse_bad("{\"a\":1,\"a\":2}", NULL);
  assert_non_null(strstr(err, "service config: invalid JSON"));
  /* NULL arguments and a NULL error buffer */
  sluice__svc_config c;
  memset(&c, 0, sizeof c);
  assert_int_equal(sluice__svc_config_parse(&c, NULL, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__svc_config_parse(NULL, "{}", err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__svc_config_parse(&c, "[", NULL, 0),
                   SLUICE_ERR_INVALID_ARG);
  /* a short error buffer is truncated, never overrun */
  char small[8];
  assert_int_equal(
      sluice__svc_config_parse(&c, "{\"methodConfig\":1}", small, sizeof small),
      SLUICE_ERR_INVALID_ARG);
  assert_string_equal(small, "methodC");
#undef RP
#undef GOOD_BACKOFF
}

static void precedence(void **state) {
  (void)state;
  sluice__svc_config c;
  parse_ok(&c, "{\"methodConfig\":["
               "{\"name\":[{\"service\":\"pkg.Svc\",\"method\":\"M\"}],"
               "\"timeout\":\"1s\"},"
               "{\"name\":[{}],\"timeout\":\"3s\"},"
               "{\"name\":[{\"service\":\"pkg.Svc\"}],\"timeout\":\"2s\"},"
               "{\"name\":[{\"service\":\"pkg.Other\",\"method\":\"X\"}],"
               "\"waitForReady\":true}]}");
  static const struct {
    const char *path;
    uint64_t timeout_ms;
  } t[] = {
      {"/pkg.Svc/M", 1000},   {"pkg.Svc/M", 1000},   {"/pkg.Svc/N", 2000},
      {"/pkg.Svc", 2000},     {"/pkg.SvcX/M", 3000}, {"/pkg.Sv/M", 3000},
      {"/pkg.Other/Y", 3000}, {"/other/M", 3000},    {"", 3000},
      {"/pkg.Svc/MM", 2000},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    const sluice_method_config *mc = sluice__svc_config_find(&c, t[i].path);
    assert_non_null(mc);
    if (mc->timeout_ms != t[i].timeout_ms)
      fail_msg("%s: timeout %llu, want %llu", t[i].path,
               (unsigned long long)mc->timeout_ms,
               (unsigned long long)t[i].timeout_ms);
  }
  /* the exact entry applies whole: its unset timeout does not fall back */
  const sluice_method_config *x = sluice__svc_config_find(&c, "/pkg.Other/X");
  assert_int_equal(x->timeout_ms, 0);
  assert_int_equal(x->wait_for_ready, 1);
  assert_null(sluice__svc_config_find(&c, NULL));
  assert_null(sluice__svc_config_find(NULL, "/a/b"));
  sluice__svc_config_clear(&c);

  /* without a default, an unknown service has none */
  parse_ok(&c, "{\"methodConfig\":[{\"name\":[{\"service\":\"a.S\"}]}]}");
  assert_null(sluice__svc_config_find(&c, "/b.S/M"));
  assert_non_null(sluice__svc_config_find(&c, "/a.S/M"));
  sluice__svc_config_clear(&c);
  memset(&c, 0, sizeof c);
  assert_null(sluice__svc_config_find(&c, "/a.S/M"));
}

static void lb_mapping(void **state) {
  (void)state;
  static const struct {
    const char *json, *want;
  } t[] = {
      {"{\"loadBalancingConfig\":[{\"round_robin\":{}}]}", "rr"},
      {"{\"loadBalancingConfig\":[{\"pick_first\":{}}]}", "rr"},
      {"{\"loadBalancingConfig\":[{\"least_request\":{\"choiceCount\":2}}]}",
       "lcc"},
      {"{\"loadBalancingConfig\":[{\"least_request_experimental\":{}}]}",
       "lcc"},
      {"{\"loadBalancingConfig\":[{\"rr\":{}}]}", "rr"},
      {"{\"loadBalancingConfig\":[{\"lcc\":{}}]}", "lcc"},
      {"{\"loadBalancingConfig\":[{\"bcc\":{}}]}", "bcc"},
      {"{\"loadBalancingConfig\":[{\"btc\":{}}]}", "btc"},
      /* the first one known wins; unknown ones before it are skipped */
      {"{\"loadBalancingConfig\":[{\"grpclb\":{}},{\"bcc\":{}},{\"rr\":{}}]}",
       "bcc"},
      {"{\"loadBalancingConfig\":[{\"btc\":{}},{\"unknown\":{}}]}", "btc"},
      /* the deprecated field, case-insensitive, only without the list */
      {"{\"loadBalancingPolicy\":\"ROUND_ROBIN\"}", "rr"},
      {"{\"loadBalancingPolicy\":\"Least_Request_Experimental\"}", "lcc"},
      {"{\"loadBalancingPolicy\":\"BTC\"}", "btc"},
      {"{\"loadBalancingPolicy\":\"round_robin\","
       "\"loadBalancingConfig\":[{\"lcc\":{}}]}",
       "lcc"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    sluice__svc_config c;
    parse_ok(&c, t[i].json);
    assert_non_null(c.lb_name);
    assert_string_equal(c.lb_name, t[i].want);
    /* every name maps to a built-in strategy */
    assert_non_null(sluice__lb_find(c.lb_name));
    sluice__svc_config_clear(&c);
  }
}

static void throttling_ratio(void **state) {
  (void)state;
  static const struct {
    double ratio;
    uint32_t milli;
  } t[] = {{0.1, 100},  {0.29, 290},   {0.57, 570},      {1, 1000},
           {0.001, 1},  {0.0015, 1},   {1.2345, 1234},   {0.999, 999},
           {0.0009, 0}, {0, 0},        {-1, 0},          {1e300, 1000000},
           {NAN, 0},    {INFINITY, 0}, {2000.5, 1000000}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (sluice__token_ratio_milli(t[i].ratio) != t[i].milli)
      fail_msg("ratio %g: %u milli, want %u", t[i].ratio,
               sluice__token_ratio_milli(t[i].ratio), t[i].milli);
  sluice__svc_config c;
  parse_ok(&c, "{\"retryThrottling\":{\"maxTokens\":1000,"
               "\"tokenRatio\":0.2999}}");
  assert_int_equal(c.throttle_max_tokens, 1000);
  assert_int_equal(c.throttle_ratio_milli, 299);
  sluice__svc_config_clear(&c);
  parse_ok(&c, "{\"retryThrottling\":{\"maxTokens\":\"7\","
               "\"tokenRatio\":3}}");
  assert_int_equal(c.throttle_max_tokens, 7);
  assert_int_equal(c.throttle_ratio_milli, 3000);
  assert_int_equal(sluice__svc_config_set_throttling(&c, 1001, 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__svc_config_set_throttling(&c, 5, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(c.throttle_max_tokens, 7);
  assert_int_equal(sluice__svc_config_set_throttling(&c, 0, 0), 0);
  assert_int_equal(c.throttle_max_tokens, 0);
  assert_int_equal(c.throttle_ratio_milli, 0);
  sluice__svc_config_clear(&c);
}

static sluice_method_config retry_mc(void) {
  sluice_method_config mc;
  sluice_method_config_init(&mc);
  mc.has_retry = 1;
  mc.retry.max_attempts = 3;
  mc.retry.initial_backoff_ms = 100;
  mc.retry.max_backoff_ms = 1000;
  mc.retry.backoff_multiplier = 2;
  mc.retry.retryable_codes = U(UNAVAILABLE);
  return mc;
}

static void typed_checks(void **state) {
  (void)state;
  sluice_method_config mc;
  memset(&mc, 0x7f, sizeof mc);
  sluice_method_config_init(&mc);
  assert_int_equal(mc.wait_for_ready, -1);
  assert_int_equal(mc.timeout_ms, 0);
  assert_false(mc.has_retry);
  assert_false(mc.has_hedging);
  assert_int_equal(mc.retry.max_attempts, 0);
  sluice_method_config_init(NULL);
  assert_int_equal(sluice__method_config_check(&mc, err, sizeof err), 0);

  mc = retry_mc();
  assert_int_equal(sluice__method_config_check(&mc, err, sizeof err), 0);
#define BAD(stmt, text)                                                        \
  do {                                                                         \
    sluice_method_config m = retry_mc();                                       \
    stmt;                                                                      \
    err[0] = 0;                                                                \
    assert_int_equal(sluice__method_config_check(&m, err, sizeof err),         \
                     SLUICE_ERR_INVALID_ARG);                                  \
    assert_string_equal(err, text);                                            \
  } while (0)
  BAD(m.retry.max_attempts = 1, "retry.max_attempts: must be at least 2");
  BAD(m.retry.max_attempts = 0, "retry.max_attempts: must be at least 2");
  BAD(m.retry.initial_backoff_ms = 0, "retry.initial_backoff_ms: must be > 0");
  BAD(m.retry.max_backoff_ms = 0, "retry.max_backoff_ms: must be > 0");
  BAD(m.retry.backoff_multiplier = 0,
      "retry.backoff_multiplier: must be a finite number > 0");
  BAD(m.retry.backoff_multiplier = -1,
      "retry.backoff_multiplier: must be a finite number > 0");
  BAD(m.retry.backoff_multiplier = NAN,
      "retry.backoff_multiplier: must be a finite number > 0");
  BAD(m.retry.backoff_multiplier = INFINITY,
      "retry.backoff_multiplier: must be a finite number > 0");
  BAD(m.retry.retryable_codes = 0,
      "retry.retryable_codes: must name at least one code");
  BAD(m.retry.retryable_codes |= U(OK),
      "retry.retryable_codes: only SLUICE_CODE_BIT() of "
      "CANCELLED..UNAUTHENTICATED (1..16), never OK");
  BAD(m.retry.retryable_codes |= SLUICE_CODE_BIT(17),
      "retry.retryable_codes: only SLUICE_CODE_BIT() of "
      "CANCELLED..UNAUTHENTICATED (1..16), never OK");
  BAD(m.wait_for_ready = 2,
      "wait_for_ready: must be -1 (unset), 0 or 1, not 2");
  BAD((m.has_hedging = 1, m.hedging.max_attempts = 2),
      "has_retry and has_hedging: a method has one policy at most");
  BAD((m.has_retry = 0, m.has_hedging = 1, m.hedging.max_attempts = 1),
      "hedging.max_attempts: must be at least 2");
  BAD((m.has_retry = 0, m.has_hedging = 1, m.hedging.max_attempts = 2,
       m.hedging.non_fatal_codes = U(OK)),
      "hedging.non_fatal_codes: only SLUICE_CODE_BIT() of "
      "CANCELLED..UNAUTHENTICATED (1..16), never OK");
#undef BAD
  /* a policy switched off is not read */
  mc = retry_mc();
  mc.has_retry = 0;
  mc.retry.max_attempts = 0;
  assert_int_equal(sluice__method_config_check(&mc, err, sizeof err), 0);
  /* per call, one attempt is allowed (no retry for this call) */
  mc = retry_mc();
  mc.retry.max_attempts = 1;
  assert_int_equal(sluice__retry_policy_check(&mc.retry, 1, err, sizeof err),
                   0);
  assert_int_equal(sluice__retry_policy_check(&mc.retry, 0, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  mc.retry.max_attempts = 0;
  assert_int_equal(sluice__retry_policy_check(&mc.retry, 1, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  assert_string_equal(err, "retry.max_attempts: must be at least 1");
  sluice_hedging_policy h = {1, 0, 0};
  assert_int_equal(sluice__hedging_policy_check(&h, 1, err, sizeof err), 0);
  assert_int_equal(sluice__hedging_policy_check(&h, 0, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__retry_policy_check(NULL, 1, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__hedging_policy_check(NULL, 1, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice__method_config_check(NULL, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
}

static void set_and_remove(void **state) {
  (void)state;
  sluice__svc_config c;
  memset(&c, 0, sizeof c);
  sluice_method_config mc = retry_mc();
  assert_int_equal(
      sluice__svc_config_set(&c, "pkg.Svc/M", &mc, err, sizeof err), 0);
  mc.timeout_ms = 5;
  assert_int_equal(sluice__svc_config_set(&c, "pkg.Svc", &mc, err, sizeof err),
                   0);
  mc.timeout_ms = 7;
  assert_int_equal(sluice__svc_config_set(&c, "", &mc, err, sizeof err), 0);
  assert_int_equal(c.n, 3);
  /* the path form names the same entry: replaced, not added */
  mc.timeout_ms = 9;
  assert_int_equal(
      sluice__svc_config_set(&c, "/pkg.Svc/M", &mc, err, sizeof err), 0);
  assert_int_equal(c.n, 3);
  assert_int_equal(sluice__svc_config_find(&c, "/pkg.Svc/M")->timeout_ms, 9);
  assert_int_equal(sluice__svc_config_find(&c, "/pkg.Svc/X")->timeout_ms, 5);
  assert_int_equal(sluice__svc_config_find(&c, "/x.Y/X")->timeout_ms, 7);
  /* removal: the service's entry takes over, then the default */
  assert_int_equal(
      sluice__svc_config_set(&c, "pkg.Svc/M", NULL, err, sizeof err), 0);
  assert_int_equal(sluice__svc_config_find(&c, "/pkg.Svc/M")->timeout_ms, 5);
  assert_int_equal(sluice__svc_config_set(&c, "pkg.Svc", NULL, err, sizeof err),
                   0);
  assert_int_equal(sluice__svc_config_find(&c, "/pkg.Svc/M")->timeout_ms, 7);
  assert_int_equal(sluice__svc_config_set(&c, "nope", NULL, err, sizeof err),
                   0);
  assert_int_equal(c.n, 1);
  /* bad names and values leave c as it was */
  static const char *bad[] = {"pkg.Svc/", "/M",     "/",       "//",
                              "a/b/c",    "/a/b/c", "/pkg.Svc"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    assert_int_equal(sluice__svc_config_set(&c, bad[i], &mc, err, sizeof err),
                     SLUICE_ERR_INVALID_ARG);
    char want[200];
    snprintf(want, sizeof want,
             "name \"%s\": must be \"pkg.Service/Method\", \"pkg.Service\" "
             "or \"\"",
             bad[i]);
    assert_string_equal(err, want);
  }
  mc.retry.max_attempts = 1;
  assert_int_equal(sluice__svc_config_set(&c, "a.B", &mc, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(c.n, 1);
  assert_int_equal(sluice__svc_config_set(&c, NULL, &mc, err, sizeof err),
                   SLUICE_ERR_INVALID_ARG);
  sluice__svc_config_clear(&c);
}

static void copy_deep(void **state) {
  (void)state;
  sluice__svc_config a, b;
  parse_ok(&a, "{\"methodConfig\":[{\"name\":[{\"service\":\"s\","
               "\"method\":\"m\"},{}],\"timeout\":\"2s\"}],"
               "\"retryThrottling\":{\"maxTokens\":3,\"tokenRatio\":0.5},"
               "\"loadBalancingConfig\":[{\"lcc\":{}}],"
               "\"healthCheckConfig\":{\"serviceName\":\"h\"}}");
  assert_int_equal(sluice__svc_config_copy(&b, &a), 0);
  sluice__svc_config_clear(&a);
  assert_int_equal(b.n, 2);
  assert_string_equal(b.entries[0].service, "s");
  assert_string_equal(b.entries[0].method, "m");
  assert_int_equal(sluice__svc_config_find(&b, "/s/m")->timeout_ms, 2000);
  assert_int_equal(b.throttle_max_tokens, 3);
  assert_int_equal(b.throttle_ratio_milli, 500);
  assert_string_equal(b.lb_name, "lcc");
  assert_true(b.have_health);
  assert_string_equal(b.health_service, "h");
  sluice__svc_config_clear(&b);
  memset(&a, 0, sizeof a);
  assert_int_equal(sluice__svc_config_copy(&b, &a), 0);
  assert_int_equal(b.n, 0);
  assert_null(b.entries);
  sluice__svc_config_clear(&b);
}

/* ---- the public setters ---- */

static void opts_defaults(void **state) {
  (void)state;
  sluice_channel_opts *o;
  assert_int_equal(sluice_channel_opts_new(&o), 0);
  assert_int_equal(o->max_attempts_cap, 5);
  assert_int_equal(o->retry_buffer, 256 * 1024);
  assert_int_equal(o->retries_enabled, 1);
  assert_true(o->budget_percent == 20);
  assert_int_equal(o->budget_min_conc, 3);
  assert_int_equal(o->cb_max_requests, 0);
  assert_int_equal(o->cb_max_pending, 0);
  assert_int_equal(o->cb_max_retries, 0);
  assert_int_equal(o->svc.n, 0);
  assert_int_equal(o->svc.throttle_max_tokens, 0);
  assert_null(o->svc.lb_name);
  assert_ptr_equal(o->lb, &sluice__lb_btc);
  sluice_channel_opts_del(o);
}

static void opts_null_args(void **state) {
  (void)state;
  sluice_method_config mc = retry_mc();
  assert_int_equal(sluice_channel_opts_set_method_config(NULL, "", &mc),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_service_config(NULL, "{}"),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_retry_throttling(NULL, 1, 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_retry_budget(NULL, 1, 1),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_max_attempts_cap(NULL, 3),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_retry_buffer(NULL, 3),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_retries_enabled(NULL, 0),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(sluice_channel_opts_set_circuit_breakers(NULL, 1, 2, 3),
                   SLUICE_ERR_INVALID_ARG);
  sluice_channel_opts *o;
  assert_int_equal(sluice_channel_opts_new(&o), 0);
  assert_int_equal(sluice_channel_opts_set_method_config(o, NULL, &mc),
                   SLUICE_ERR_INVALID_ARG);
  assert_string_equal(sluice_channel_opts_last_error(o),
                      "name: NULL (\"\" is the channel default)");
  assert_int_equal(sluice_channel_opts_set_service_config(o, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_string_equal(sluice_channel_opts_last_error(o),
                      "service config: NULL");
  sluice_resilience_stats_init_sized(NULL, sizeof(sluice_resilience_stats));
  sluice_resilience_stats_clear(NULL);
  sluice_channel_opts_del(o);
}

static void opts_typed_setters(void **state) {
  (void)state;
  sluice_channel_opts *o;
  assert_int_equal(sluice_channel_opts_new(&o), 0);
#define REFUSED(call, text)                                                    \
  do {                                                                         \
    assert_int_equal(call, SLUICE_ERR_INVALID_ARG);                            \
    assert_string_equal(sluice_channel_opts_last_error(o), text);              \
  } while (0)
#define OK(call)                                                               \
  do {                                                                         \
    assert_int_equal(call, 0);                                                 \
    assert_string_equal(sluice_channel_opts_last_error(o), "");                \
  } while (0)
  /* throttling */
  OK(sluice_channel_opts_set_retry_throttling(o, 10, 0.1));
  assert_int_equal(o->svc.throttle_max_tokens, 10);
  assert_int_equal(o->svc.throttle_ratio_milli, 100);
  REFUSED(sluice_channel_opts_set_retry_throttling(o, 1001, 0.1),
          "max_tokens: must be 0 (off) or in 1..1000");
  REFUSED(sluice_channel_opts_set_retry_throttling(o, 5, 0.0001),
          "token_ratio: must be a number >= 0.001 (three decimals are kept)");
  REFUSED(sluice_channel_opts_set_retry_throttling(o, 5, NAN),
          "token_ratio: must be a number >= 0.001 (three decimals are kept)");
  REFUSED(sluice_channel_opts_set_retry_throttling(o, 5, -1),
          "token_ratio: must be a number >= 0.001 (three decimals are kept)");
  assert_int_equal(o->svc.throttle_max_tokens, 10); /* untouched */
  assert_int_equal(o->svc.throttle_ratio_milli, 100);
  OK(sluice_channel_opts_set_retry_throttling(o, 0, 0)); /* off */
  assert_int_equal(o->svc.throttle_max_tokens, 0);
  OK(sluice_channel_opts_set_retry_throttling(o, 1000, 1.2345));
  assert_int_equal(o->svc.throttle_ratio_milli, 1234);
  /* budget */
  OK(sluice_channel_opts_set_retry_budget(o, 50, 7));
  assert_true(o->budget_percent == 50);
  assert_int_equal(o->budget_min_conc, 7);
  OK(sluice_channel_opts_set_retry_budget(o, 0, 0));
  OK(sluice_channel_opts_set_retry_budget(o, 100, 0));
  REFUSED(sluice_channel_opts_set_retry_budget(o, 100.5, 1),
          "budget_percent: must be in [0, 100]");
  REFUSED(sluice_channel_opts_set_retry_budget(o, -1, 1),
          "budget_percent: must be in [0, 100]");
  REFUSED(sluice_channel_opts_set_retry_budget(o, NAN, 1),
          "budget_percent: must be in [0, 100]");
  assert_true(o->budget_percent == 100);
  assert_int_equal(o->budget_min_conc, 0);
  /* cap */
  OK(sluice_channel_opts_set_max_attempts_cap(o, 1));
  OK(sluice_channel_opts_set_max_attempts_cap(o, 10));
  REFUSED(sluice_channel_opts_set_max_attempts_cap(o, 0),
          "max_attempts: must be at least 1");
  assert_int_equal(o->max_attempts_cap, 10);
  /* buffer */
  OK(sluice_channel_opts_set_retry_buffer(o, 1));
  REFUSED(sluice_channel_opts_set_retry_buffer(o, 0),
          "per_call_bytes: must be > 0 (to stop retries, "
          "sluice_channel_opts_set_retries_enabled(o, 0))");
  assert_int_equal(o->retry_buffer, 1);
  /* enable switch: any non-zero is on */
  OK(sluice_channel_opts_set_retries_enabled(o, 0));
  assert_int_equal(o->retries_enabled, 0);
  OK(sluice_channel_opts_set_retries_enabled(o, 42));
  assert_int_equal(o->retries_enabled, 1);
  /* breakers */
  OK(sluice_channel_opts_set_circuit_breakers(o, 20, 5, 3));
  assert_int_equal(o->cb_max_requests, 20);
  assert_int_equal(o->cb_max_pending, 5);
  assert_int_equal(o->cb_max_retries, 3);
  OK(sluice_channel_opts_set_circuit_breakers(o, 0, 0, 0));
  assert_int_equal(o->cb_max_requests, 0);
  /* method configs */
  sluice_method_config mc = retry_mc();
  OK(sluice_channel_opts_set_method_config(o, "pkg.Svc/M", &mc));
  mc.retry.max_attempts = 1;
  REFUSED(sluice_channel_opts_set_method_config(o, "pkg.Svc/M", &mc),
          "retry.max_attempts: must be at least 2");
  assert_int_equal(
      sluice__svc_config_find(&o->svc, "/pkg.Svc/M")->retry.max_attempts, 3);
  REFUSED(sluice_channel_opts_set_method_config(o, "a/b/c", &mc),
          "retry.max_attempts: must be at least 2");
  mc.retry.max_attempts = 2;
  REFUSED(sluice_channel_opts_set_method_config(o, "a/b/c", &mc),
          "name \"a/b/c\": must be \"pkg.Service/Method\", \"pkg.Service\" "
          "or \"\"");
  OK(sluice_channel_opts_set_method_config(o, "pkg.Svc/M", NULL));
  assert_int_equal(o->svc.n, 0);
#undef REFUSED
#undef OK
  sluice_channel_opts_del(o);
}

static void opts_service_config(void **state) {
  (void)state;
  sluice_channel_opts *o;
  assert_int_equal(sluice_channel_opts_new(&o), 0);
  sluice_method_config mc = retry_mc();
  assert_int_equal(sluice_channel_opts_set_method_config(o, "old.Svc", &mc), 0);
  assert_int_equal(sluice_channel_opts_set_lb(o, "bcc"), 0);
  assert_int_equal(sluice_channel_opts_set_retry_throttling(o, 9, 0.9), 0);

  /* an invalid config, whose first parts are fine: nothing of it applies */
  assert_int_equal(
      sluice_channel_opts_set_service_config(
          o, "{\"methodConfig\":[{\"name\":[{\"service\":\"new.Svc\"}],"
             "\"timeout\":\"1s\"}],"
             "\"loadBalancingConfig\":[{\"round_robin\":{}}],"
             "\"retryThrottling\":{\"maxTokens\":5000,\"tokenRatio\":1}}"),
      SLUICE_ERR_INVALID_ARG);
  assert_string_equal(sluice_channel_opts_last_error(o),
                      "retryThrottling.maxTokens: must be an integer in "
                      "1..1000");
  assert_int_equal(o->svc.n, 1);
  assert_string_equal(o->svc.entries[0].service, "old.Svc");
  assert_ptr_equal(o->lb, &sluice__lb_bcc);
  assert_int_equal(o->svc.throttle_max_tokens, 9);
  assert_int_equal(o->svc.throttle_ratio_milli, 900);
  assert_null(sluice__svc_config_find(&o->svc, "/new.Svc/M"));

  /* a valid one replaces method configs, throttling and strategy */
  assert_int_equal(sluice_channel_opts_set_service_config(o, A6_EXAMPLE), 0);
  assert_string_equal(sluice_channel_opts_last_error(o), "");
  assert_int_equal(o->svc.n, 1);
  assert_null(sluice__svc_config_find(&o->svc, "/old.Svc/M"));
  assert_int_equal(
      sluice__svc_config_find(&o->svc, "/pkg.Svc/M")->retry.max_attempts, 4);
  assert_int_equal(o->svc.throttle_max_tokens, 10);
  assert_int_equal(o->svc.throttle_ratio_milli, 100);
  assert_ptr_equal(o->lb, &sluice__lb_bcc); /* it names none: kept */

  assert_int_equal(sluice_channel_opts_set_service_config(
                       o, "{\"loadBalancingConfig\":[{\"pick_first\":{}}]}"),
                   0);
  assert_ptr_equal(o->lb, &sluice__lb_rr);
  assert_int_equal(o->svc.n, 0);
  assert_int_equal(o->svc.throttle_max_tokens, 0);
  assert_int_equal(sluice_channel_opts_set_service_config(
                       o, "{\"loadBalancingConfig\":[{\"least_request\":{}}]}"),
                   0);
  assert_ptr_equal(o->lb, &sluice__lb_lcc);
  assert_int_equal(sluice_channel_opts_set_service_config(
                       o, "{\"loadBalancingConfig\":[{\"grpclb\":{}}]}"),
                   SLUICE_ERR_INVALID_ARG);
  assert_ptr_equal(o->lb, &sluice__lb_lcc);

  /* a typed entry after the JSON adds to it; last_error clears on success */
  assert_int_equal(sluice_channel_opts_set_service_config(o, A6_EXAMPLE), 0);
  assert_int_equal(sluice_channel_opts_set_method_config(o, "", &mc), 0);
  assert_int_equal(o->svc.n, 2);

  /* the channel's deep copy */
  struct sluice_channel_opts copy;
  assert_int_equal(sluice__channel_opts_copy(&copy, o), 0);
  sluice_channel_opts_del(o);
  assert_int_equal(copy.svc.n, 2);
  assert_int_equal(
      sluice__svc_config_find(&copy.svc, "/pkg.Svc/M")->retry.max_attempts, 4);
  assert_int_equal(
      sluice__svc_config_find(&copy.svc, "/x.Y/Z")->retry.max_attempts, 3);
  assert_int_equal(copy.svc.throttle_ratio_milli, 100);
  assert_int_equal(copy.max_attempts_cap, 5);
  sluice__channel_opts_clear(&copy);
  sluice__channel_opts_clear(&copy); /* idempotent */
  assert_int_equal(copy.svc.n, 0);
}

static void resilience_stats_helpers(void **state) {
  (void)state;
  sluice_resilience_stats s;
  memset(&s, 0x33, sizeof s);
  sluice_resilience_stats_init(&s);
  assert_int_equal(s.struct_size, sizeof s);
  assert_int_equal(s.total.calls, 0);
  assert_int_equal(s.n_methods, 0);
  assert_null(s.methods);
  assert_true(s.throttle_tokens == 0);
  /* what get_resilience_stats fills: clear frees methods, keeps the size */
  s.total.retries = 4;
  s.n_methods = 2;
  s.methods = calloc(2, sizeof *s.methods);
  assert_non_null(s.methods);
  sluice_resilience_stats_clear(&s);
  assert_int_equal(s.struct_size, sizeof s);
  assert_int_equal(s.total.retries, 0);
  assert_int_equal(s.n_methods, 0);
  assert_null(s.methods);
  sluice_resilience_stats_clear(&s); /* again: nothing to free */
  /* a shorter (older) struct: only its bytes are touched */
  unsigned char buf[sizeof s + 16];
  memset(buf, 0x44, sizeof buf);
  size_t small = offsetof(sluice_resilience_stats, total) + sizeof(uint64_t);
  sluice_resilience_stats_init_sized((sluice_resilience_stats *)buf, small);
  assert_int_equal(((sluice_resilience_stats *)buf)->struct_size, small);
  for (size_t i = sizeof(size_t); i < small; i++)
    assert_int_equal(buf[i], 0);
  for (size_t i = small; i < sizeof buf; i++)
    assert_int_equal(buf[i], 0x44);
  memset(buf + sizeof(size_t), 0x55, small - sizeof(size_t));
  sluice_resilience_stats_clear((sluice_resilience_stats *)buf);
  for (size_t i = small; i < sizeof buf; i++)
    assert_int_equal(buf[i], 0x44);
  assert_int_equal(((sluice_resilience_stats *)buf)->struct_size, small);
  /* too small for struct_size itself: nothing done */
  memset(buf, 0x44, sizeof buf);
  sluice_resilience_stats_init_sized((sluice_resilience_stats *)buf, 3);
  for (size_t i = 0; i < sizeof buf; i++)
    assert_int_equal(buf[i], 0x44);
}

/* ---- malformed input: refused or parsed, never a crash or a leak ---- */

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void try_parse(const char *json) {
  sluice__svc_config c;
  memset(&c, 0, sizeof c);
  int rv = sluice__svc_config_parse(&c, json, err, sizeof err);
  assert_true(rv == 0 || rv == SLUICE_ERR_INVALID_ARG);
  if (rv == 0) {
    /* whatever was accepted passes the typed checks too */
    for (size_t i = 0; i < c.n; i++)
      assert_int_equal(
          sluice__method_config_check(&c.entries[i].mc, err, sizeof err), 0);
    assert_true(c.throttle_max_tokens <= 1000);
    sluice__svc_config_clear(&c);
  } else {
    assert_true(strlen(err) > 0);
    assert_int_equal(c.n, 0);
    assert_null(c.entries);
  }
}

static void malformed(void **state) {
  (void)state;
  static const char *const full =
      "{\"methodConfig\":[{\"name\":[{\"service\":\"pkg.Svc\",\"method\":"
      "\"M\"},{\"service\":\"pkg.Other\"}],\"timeout\":\"1.25s\","
      "\"waitForReady\":true,\"maxRequestMessageBytes\":\"1024\","
      "\"retryPolicy\":{\"maxAttempts\":4,\"initialBackoff\":\"0.1s\","
      "\"maxBackoff\":\"1s\",\"backoffMultiplier\":2,"
      "\"retryableStatusCodes\":[\"UNAVAILABLE\",13]}},{\"name\":[{}],"
      "\"hedgingPolicy\":{\"maxAttempts\":3,\"hedgingDelay\":\"0.01s\","
      "\"nonFatalStatusCodes\":[14]}}],\"retryThrottling\":{\"maxTokens\":10,"
      "\"tokenRatio\":0.1},\"loadBalancingConfig\":[{\"x\":{}},"
      "{\"round_robin\":{}}],\"healthCheckConfig\":{\"serviceName\":\"h\"}}";
  size_t n = strlen(full);
  char *buf = malloc(n + 1);
  assert_non_null(buf);
  try_parse(full);
  {
    sluice__svc_config c;
    parse_ok(&c, full);
    assert_int_equal(c.n, 3);
    sluice__svc_config_clear(&c);
  }
  /* every truncation */
  for (size_t len = 0; len < n; len++) {
    memcpy(buf, full, len);
    buf[len] = 0;
    try_parse(buf);
  }
  /* random byte mutations, seeded */
  static const char alphabet[] = "{}[]\",:0123456789.-eE stufnl\\/x";
  for (int round = 0; round < 20000; round++) {
    memcpy(buf, full, n + 1);
    int k = 1 + (int)(next_rand() % 4);
    for (int i = 0; i < k; i++)
      buf[next_rand() % n] = alphabet[next_rand() % (sizeof alphabet - 1)];
    try_parse(buf);
  }
  free(buf);
  /* every field with a value of each wrong type */
  static const char *const fields[] = {
      "\"methodConfig\":%s",
      "\"methodConfig\":[%s]",
      "\"methodConfig\":[{\"name\":%s}]",
      "\"methodConfig\":[{\"name\":[%s]}]",
      "\"methodConfig\":[{\"name\":[{\"service\":%s}]}]",
      "\"methodConfig\":[{\"name\":[{\"service\":\"s\",\"method\":%s}]}]",
      "\"methodConfig\":[{\"name\":[{}],\"timeout\":%s}]",
      "\"methodConfig\":[{\"name\":[{}],\"waitForReady\":%s}]",
      "\"methodConfig\":[{\"name\":[{}],\"maxRequestMessageBytes\":%s}]",
      "\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":%s}]",
      "\"methodConfig\":[{\"name\":[{}],\"retryPolicy\":{\"maxAttempts\":%s}}]",
      "\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":%s}]",
      "\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{\"maxAttempts\":2,"
      "\"hedgingDelay\":%s}}]",
      "\"methodConfig\":[{\"name\":[{}],\"hedgingPolicy\":{\"maxAttempts\":2,"
      "\"nonFatalStatusCodes\":%s}}]",
      "\"retryThrottling\":%s",
      "\"retryThrottling\":{\"maxTokens\":%s,\"tokenRatio\":1}",
      "\"retryThrottling\":{\"maxTokens\":1,\"tokenRatio\":%s}",
      "\"loadBalancingConfig\":%s",
      "\"loadBalancingConfig\":[%s]",
      "\"loadBalancingPolicy\":%s",
      "\"healthCheckConfig\":%s",
      "\"healthCheckConfig\":{\"serviceName\":%s}",
  };
  static const char *const values[] = {
      "1",
      "-1",
      "0",
      "1.5",
      "1e308",
      "-1e308",
      "true",
      "false",
      "\"\"",
      "\"x\"",
      "[]",
      "{}",
      "[[]]",
      "[{}]",
      "{\"a\":{}}",
      "99999999999999999999999999999999",
      "\"99999999999999999999999s\"",
      "\"\\u00e9\"",
      "[1,\"a\",null,{}]",
  };
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
      char field[300], json[400];
      snprintf(field, sizeof field, fields[f], values[v]);
      snprintf(json, sizeof json, "{%s}", field);
      try_parse(json);
    }
  /* deep nesting is refused by jansson's depth limit, not a stack overflow */
  size_t depth = 100000;
  char *deep = malloc(2 * depth + 64);
  assert_non_null(deep);
  char *p = deep;
  p += sprintf(p, "{\"methodConfig\":");
  for (size_t i = 0; i < depth; i++)
    *p++ = '[';
  for (size_t i = 0; i < depth; i++)
    *p++ = ']';
  strcpy(p, "}");
  parse_bad(deep, NULL);
  assert_non_null(strstr(err, "service config: invalid JSON"));
  free(deep);
  /* invalid UTF-8, an embedded NUL escape, trailing text and a BOM are
   * refused by jansson itself */
  static const char *const not_json[] = {
      "{\"healthCheckConfig\":{\"serviceName\":\"\xff\xfe\"}}",
      "{\"healthCheckConfig\":{\"serviceName\":\"a\\u0000b\"}}",
      "{} trailing",
      "\xef\xbb\xbf{}",
  };
  for (size_t i = 0; i < sizeof not_json / sizeof not_json[0]; i++) {
    parse_bad(not_json[i], NULL);
    assert_non_null(strstr(err, "service config: invalid JSON"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_a6_example),
      cmocka_unit_test(valid_every_field),
      cmocka_unit_test(durations_and_numbers),
      cmocka_unit_test(status_codes),
      cmocka_unit_test(rejections),
      cmocka_unit_test(precedence),
      cmocka_unit_test(lb_mapping),
      cmocka_unit_test(throttling_ratio),
      cmocka_unit_test(typed_checks),
      cmocka_unit_test(set_and_remove),
      cmocka_unit_test(copy_deep),
      cmocka_unit_test(opts_defaults),
      cmocka_unit_test(opts_null_args),
      cmocka_unit_test(opts_typed_setters),
      cmocka_unit_test(opts_service_config),
      cmocka_unit_test(resilience_stats_helpers),
      cmocka_unit_test(malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
