/* transport/addr.c: channel targets in every form gRPC names (and the ones
 * sluice refuses, with their reasons), address formatting in its three
 * styles, getaddrinfo results and the listener's host:port. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "transport/addr.h"

static void parse_ok(const char *text, sluice__target *t) {
  const char *reason = "untouched";
  int rv = sluice__target_parse(text, t, &reason);
  if (rv != 0)
    fail_msg("%s: %s", text, reason);
  assert_null(reason);
}

static void parse_bad(const char *text, const char *want_reason) {
  sluice__target t;
  const char *reason = NULL;
  assert_int_equal(sluice__target_parse(text, &t, &reason), -1);
  assert_non_null(reason);
  if (strcmp(reason, want_reason) != 0)
    fail_msg("%s: got \"%s\", want \"%s\"", text ? text : "(null)", reason,
             want_reason);
  /* Nothing is left for the caller to free. */
  assert_null(t.host);
  assert_null(t.port);
  assert_null(t.authority);
  assert_null(t.path);
  assert_null(t.addrs);
  assert_int_equal(t.n_addrs, 0);
}

static void expect_dns(const char *text, const char *host, const char *port,
                       const char *authority) {
  sluice__target t;
  parse_ok(text, &t);
  assert_int_equal(t.kind, SLUICE__TARGET_DNS);
  assert_string_equal(t.host, host);
  assert_string_equal(t.port, port);
  assert_string_equal(t.authority, authority);
  assert_null(t.path);
  assert_null(t.addrs);
  sluice__target_free(&t);
}

static void dns_forms(void **state) {
  (void)state;
  expect_dns("localhost:50051", "localhost", "50051", "localhost:50051");
  expect_dns("dns:localhost:1", "localhost", "1", "localhost:1");
  expect_dns("dns:///example.com:8080", "example.com", "8080",
             "example.com:8080");
  /* No port: 443, as gRPC's default. */
  expect_dns("example.com", "example.com", "443", "example.com:443");
  expect_dns("dns:///example.com", "example.com", "443", "example.com:443");
  /* An IPv6 literal in brackets: the host loses them, the authority keeps
   * them. */
  expect_dns("[::1]:50051", "::1", "50051", "[::1]:50051");
  expect_dns("dns:[fe80::1]", "fe80::1", "443", "[fe80::1]:443");
  /* The port is a string for getaddrinfo: digits only, range unchecked. */
  expect_dns("h:99999", "h", "99999", "h:99999");
  expect_dns("1.2.3.4:0", "1.2.3.4", "0", "1.2.3.4:0");
}

static void dns_bad(void **state) {
  (void)state;
  parse_bad(NULL, "empty target");
  parse_bad("", "empty target");
  parse_bad("dns://8.8.8.8/example.com:1",
            "dns: with an authority (DNS server) is not supported");
  parse_bad("dns:", "bad host:port");
  parse_bad("dns:///", "bad host:port");
  parse_bad("host:", "bad host:port");
  parse_bad(":50051", "bad host:port");
  parse_bad("host:50a", "bad host:port");
  parse_bad("host:-1", "bad host:port");
  parse_bad("::1", "bad host:port");       /* IPv6 needs brackets */
  parse_bad("::1:50051", "bad host:port"); /* ... even with a port */
  parse_bad("[::1", "bad host:port");
  parse_bad("[::1]50051", "bad host:port");
  parse_bad("[::1]:", "bad host:port");
  parse_bad("[]:50051", "bad host:port");
  parse_bad("a:1:2", "bad host:port");
}

static void expect_addr(const sluice__addr *a, int family, const char *ip,
                        unsigned port, const char *name) {
  assert_int_equal(a->ss.ss_family, family);
  char buf[INET6_ADDRSTRLEN];
  if (family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a->ss;
    assert_non_null(inet_ntop(AF_INET, &s4->sin_addr, buf, sizeof buf));
    assert_int_equal(ntohs(s4->sin_port), port);
  } else {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->ss;
    assert_non_null(inet_ntop(AF_INET6, &s6->sin6_addr, buf, sizeof buf));
    assert_int_equal(ntohs(s6->sin6_port), port);
  }
  assert_string_equal(buf, ip);
  assert_string_equal(a->name, name);
}

static void static_ipv4(void **state) {
  (void)state;
  sluice__target t;
  parse_ok("ipv4:127.0.0.1:50051,10.0.0.2:7", &t);
  assert_int_equal(t.kind, SLUICE__TARGET_STATIC);
  assert_int_equal(t.n_addrs, 2);
  expect_addr(&t.addrs[0], AF_INET, "127.0.0.1", 50051, "127.0.0.1:50051");
  expect_addr(&t.addrs[1], AF_INET, "10.0.0.2", 7, "10.0.0.2:7");
  /* The first address is the default authority. */
  assert_string_equal(t.authority, "127.0.0.1:50051");
  assert_null(t.host);
  assert_null(t.path);
  sluice__target_free(&t);

  parse_ok("ipv4:192.168.1.1", &t);
  assert_int_equal(t.n_addrs, 1);
  expect_addr(&t.addrs[0], AF_INET, "192.168.1.1", 443, "192.168.1.1:443");
  sluice__target_free(&t);

  parse_ok("ipv4:1.2.3.4:65535", &t);
  expect_addr(&t.addrs[0], AF_INET, "1.2.3.4", 65535, "1.2.3.4:65535");
  sluice__target_free(&t);

  parse_ok("ipv4:1.2.3.4:000080", &t); /* leading zeros are digits */
  expect_addr(&t.addrs[0], AF_INET, "1.2.3.4", 80, "1.2.3.4:80");
  sluice__target_free(&t);

  /* A trailing ',' ends the list (today's behaviour; an empty item
   * elsewhere is an error, below). */
  parse_ok("ipv4:1.2.3.4:1,", &t);
  assert_int_equal(t.n_addrs, 1);
  sluice__target_free(&t);
}

static void static_ipv6(void **state) {
  (void)state;
  sluice__target t;
  parse_ok("ipv6:[::1]:5,[fe80::1]:6,[2001:db8::7]", &t);
  assert_int_equal(t.kind, SLUICE__TARGET_STATIC);
  assert_int_equal(t.n_addrs, 3);
  expect_addr(&t.addrs[0], AF_INET6, "::1", 5, "[::1]:5");
  expect_addr(&t.addrs[1], AF_INET6, "fe80::1", 6, "[fe80::1]:6");
  expect_addr(&t.addrs[2], AF_INET6, "2001:db8::7", 443, "[2001:db8::7]:443");
  assert_string_equal(t.authority, "[::1]:5");
  sluice__target_free(&t);
}

static void static_bad(void **state) {
  (void)state;
  static const char *const bad[] = {
      "ipv4:",                   /* no address */
      "ipv4:1.2.3.4:0",          /* port 0 */
      "ipv4:1.2.3.4:65536",      /* port out of range */
      "ipv4:1.2.3.4:4294967297", /* ... not wrapped to 1 */
      "ipv4:1.2.3.4:99999999999999999999",
      "ipv4:999.1.1.1:5",          /* not an address */
      "ipv4:localhost:5",          /* names are for dns: */
      "ipv4:[::1]:5",              /* IPv6 in an ipv4: list */
      "ipv6:127.0.0.1:5",          /* IPv4 in an ipv6: list */
      "ipv6:::1",                  /* IPv6 without brackets */
      "ipv6:[::1]x",               /* junk after ']' */
      "ipv4:1.2.3.4:5,,1.2.3.4:6", /* empty item */
      "ipv4:,1.2.3.4:5",           /* empty first item */
      "ipv4:1.2.3.4:x",            /* non-digit port */
      "ipv4:1.2.3.4:5,1.2.3.4:0",  /* a bad second item */
      "ipv6:[::1]:5,[::zz]:6",     /* a bad second item */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    parse_bad(bad[i], "bad address list (want ipv4:1.2.3.4:port,... or "
                      "ipv6:[::1]:port,...)");
}

static void unix_forms(void **state) {
  (void)state;
  sluice__target t;
  parse_ok("unix:/tmp/s.sock", &t);
  assert_int_equal(t.kind, SLUICE__TARGET_UNIX);
  assert_string_equal(t.path, "/tmp/s.sock");
  assert_string_equal(t.authority, "localhost");
  assert_null(t.host);
  assert_null(t.addrs);
  sluice__target_free(&t);

  parse_ok("unix:///tmp/s.sock", &t); /* unix://<absolute path> */
  assert_string_equal(t.path, "/tmp/s.sock");
  sluice__target_free(&t);

  parse_ok("unix:relative/s.sock", &t);
  assert_string_equal(t.path, "relative/s.sock");
  sluice__target_free(&t);

  /* The longest path sun_path holds with its NUL. */
  char text[5 + sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
  size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
  memcpy(text, "unix:", 5);
  memset(text + 5, 'p', max);
  text[5 + max] = '\0';
  parse_ok(text, &t);
  assert_int_equal(strlen(t.path), max);
  sluice__target_free(&t);

  const char *why = "unix: target needs a path shorter than 108 bytes";
  text[5 + max] = 'p';
  text[5 + max + 1] = '\0';
  parse_bad(text, why);
  parse_bad("unix:", why);
  parse_bad("unix://", why);
}

static void unix_abstract(void **state) {
  (void)state;
  /* Not mistaken for the DNS name "unix-abstract" with port 50051. */
  parse_bad("unix-abstract:50051", "unix-abstract: targets are not supported");
  parse_bad("unix-abstract:name", "unix-abstract: targets are not supported");
  parse_bad("unix-abstract:", "unix-abstract: targets are not supported");
}

static void target_free_twice(void **state) {
  (void)state;
  sluice__target t;
  parse_ok("dns:host:1", &t);
  sluice__target_free(&t);
  assert_null(t.host);
  sluice__target_free(&t); /* zeroed: nothing to free twice */
}

static struct sockaddr_in v4(const char *ip, unsigned port) {
  struct sockaddr_in s;
  memset(&s, 0, sizeof s);
  s.sin_family = AF_INET;
  s.sin_port = htons((uint16_t)port);
  assert_int_equal(inet_pton(AF_INET, ip, &s.sin_addr), 1);
  return s;
}

static struct sockaddr_in6 v6(const char *ip, unsigned port) {
  struct sockaddr_in6 s;
  memset(&s, 0, sizeof s);
  s.sin6_family = AF_INET6;
  s.sin6_port = htons((uint16_t)port);
  assert_int_equal(inet_pton(AF_INET6, ip, &s.sin6_addr), 1);
  return s;
}

static void print_expect(const void *sa, sluice__addr_style st,
                         const char *want) {
  char buf[128];
  memset(buf, 'x', sizeof buf);
  size_t n = sluice__addr_print(sa, st, buf, sizeof buf);
  assert_string_equal(buf, want);
  assert_int_equal(n, strlen(want));
}

static void print_styles(void **state) {
  (void)state;
  struct sockaddr_in a4 = v4("10.1.2.3", 50051);
  print_expect(&a4, SLUICE__ADDR_HOSTPORT, "10.1.2.3:50051");
  print_expect(&a4, SLUICE__ADDR_URI, "ipv4:10.1.2.3:50051");
  print_expect(&a4, SLUICE__ADDR_HOST, "10.1.2.3");

  struct sockaddr_in6 a6 = v6("2001:db8::1", 443);
  print_expect(&a6, SLUICE__ADDR_HOSTPORT, "[2001:db8::1]:443");
  print_expect(&a6, SLUICE__ADDR_URI, "ipv6:[2001:db8::1]:443");
  print_expect(&a6, SLUICE__ADDR_HOST, "2001:db8::1");

  struct sockaddr_in6 m6 = v6("::ffff:1.2.3.4", 0);
  print_expect(&m6, SLUICE__ADDR_URI, "ipv6:[::ffff:1.2.3.4]:0");

  struct sockaddr_un u;
  memset(&u, 0, sizeof u);
  u.sun_family = AF_UNIX;
  strcpy(u.sun_path, "/run/x.sock");
  print_expect(&u, SLUICE__ADDR_HOSTPORT, "/run/x.sock");
  print_expect(&u, SLUICE__ADDR_URI, "unix:/run/x.sock");
  print_expect(&u, SLUICE__ADDR_HOST, "");
  /* A full sun_path without a NUL is read no further than sun_path. */
  memset(u.sun_path, 'q', sizeof u.sun_path);
  char big[sizeof u.sun_path + 8];
  size_t n = sluice__addr_print((const struct sockaddr *)&u,
                                SLUICE__ADDR_HOSTPORT, big, sizeof big);
  assert_int_equal(n, sizeof u.sun_path);

  struct sockaddr_storage other;
  memset(&other, 0, sizeof other);
  other.ss_family = AF_UNSPEC;
  print_expect(&other, SLUICE__ADDR_URI, "");
  print_expect(&other, SLUICE__ADDR_HOSTPORT, "");
}

static void print_truncates(void **state) {
  (void)state;
  struct sockaddr_in6 a6 = v6("2001:db8:1:2:3:4:5:6", 65535);
  char buf[8];
  size_t n = sluice__addr_print((const struct sockaddr *)&a6, SLUICE__ADDR_URI,
                                buf, sizeof buf);
  assert_int_equal(n, 7);
  assert_string_equal(buf, "ipv6:[2");
  char one[1] = {'x'};
  assert_int_equal(sluice__addr_print((const struct sockaddr *)&a6,
                                      SLUICE__ADDR_HOST, one, 1),
                   0);
  assert_int_equal(one[0], '\0');
  /* The longest peer fits conn.h's 64-byte peer buffer. */
  struct sockaddr_in6 w =
      v6("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", 65535);
  char peer[64];
  n = sluice__addr_print((const struct sockaddr *)&w, SLUICE__ADDR_URI, peer,
                         sizeof peer);
  assert_int_equal(n, strlen(peer));
  assert_true(n < sizeof peer - 1);
  assert_int_equal(peer[n - 1], '5');
}

static void addr_format_fills_name(void **state) {
  (void)state;
  sluice__addr a;
  memset(&a, 0, sizeof a);
  struct sockaddr_in s = v4("127.0.0.1", 9);
  memcpy(&a.ss, &s, sizeof s);
  sluice__addr_format(&a);
  assert_string_equal(a.name, "127.0.0.1:9");
}

static void from_addrinfo(void **state) {
  (void)state;
  struct sockaddr_in a = v4("10.0.0.1", 80), b = v4("10.0.0.2", 80);
  struct sockaddr_in6 c = v6("::1", 80);
  struct sockaddr_un u;
  memset(&u, 0, sizeof u);
  u.sun_family = AF_UNIX;
  struct addrinfo ai[5];
  memset(ai, 0, sizeof ai);
  const void *sas[5] = {&a, &u, &c, &a, &b}; /* a twice, a Unix one */
  socklen_t lens[5] = {sizeof a, sizeof u, sizeof c, sizeof a, sizeof b};
  for (int i = 0; i < 5; i++) {
    ai[i].ai_family = ((const struct sockaddr *)sas[i])->sa_family;
    ai[i].ai_addr = (struct sockaddr *)sas[i];
    ai[i].ai_addrlen = lens[i];
    ai[i].ai_next = i < 4 ? &ai[i + 1] : NULL;
  }
  size_t n = 99;
  sluice__addr *v = sluice__addrs_from_ai(ai, &n);
  assert_non_null(v);
  assert_int_equal(n, 3);
  assert_string_equal(v[0].name, "10.0.0.1:80");
  assert_string_equal(v[1].name, "[::1]:80");
  assert_string_equal(v[2].name, "10.0.0.2:80");
  assert_int_equal(v[1].ss.ss_family, AF_INET6);
  free(v);

  /* Nothing usable: NULL, count 0. */
  ai[1].ai_next = NULL; /* the Unix address alone */
  n = 99;
  assert_null(sluice__addrs_from_ai(&ai[1], &n));
  assert_int_equal(n, 0);
  n = 99;
  assert_null(sluice__addrs_from_ai(NULL, &n));
  assert_int_equal(n, 0);
}

static void listen_expect(const char *address, size_t cap, const char *host,
                          const char *port) {
  char h[256];
  const char *p = NULL;
  assert_true(cap <= sizeof h);
  if (sluice__addr_split_listen(address, h, cap, &p) != 0)
    fail_msg("%s rejected", address);
  assert_string_equal(h, host);
  assert_string_equal(p, port);
  assert_true(p > address && p < address + strlen(address));
}

static void listen_bad(const char *address, size_t cap) {
  char h[256];
  const char *p = NULL;
  if (sluice__addr_split_listen(address, h, cap, &p) != -1)
    fail_msg("%s accepted", address);
}

static void split_listen(void **state) {
  (void)state;
  listen_expect("0.0.0.0:50051", 256, "0.0.0.0", "50051");
  listen_expect("localhost:0", 256, "localhost", "0");
  listen_expect("[::1]:8080", 256, "::1", "8080");
  listen_expect("[::]:1", 256, "::", "1");
  listen_expect("::1:8080", 256, "::1", "8080"); /* last ':' splits */
  listen_expect("[]:7", 256, "", "7");           /* every interface */
  listen_expect("[x:7", 256, "[x", "7");         /* brackets only in pairs */
  /* The host must fit with its NUL; the limit counts the brackets. */
  listen_expect("1234567:1", 8, "1234567", "1");
  listen_bad("12345678:1", 8);
  listen_expect("[::1]:1", 6, "::1", "1");
  listen_bad("[::1]:1", 5);

  listen_bad("nocolon", 256);
  listen_bad(":50051", 256); /* nothing before the ':' */
  listen_bad("host:", 256);
  listen_bad("host:5x", 256);
  listen_bad("host:+5", 256);
  listen_bad("[::1]", 256); /* the last ':' is inside the brackets */
  listen_bad("", 256);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dns_forms),
      cmocka_unit_test(dns_bad),
      cmocka_unit_test(static_ipv4),
      cmocka_unit_test(static_ipv6),
      cmocka_unit_test(static_bad),
      cmocka_unit_test(unix_forms),
      cmocka_unit_test(unix_abstract),
      cmocka_unit_test(target_free_twice),
      cmocka_unit_test(print_styles),
      cmocka_unit_test(print_truncates),
      cmocka_unit_test(addr_format_fills_name),
      cmocka_unit_test(from_addrinfo),
      cmocka_unit_test(split_listen),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
