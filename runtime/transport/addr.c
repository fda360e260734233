/* Target parsing, listener address parsing and address formatting. */
#include "transport/addr.h"

#include "core/alloc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

static char *dup_n(const char *s, size_t n) {
  char *d = sluice__malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* Splits "host:port", "[v6]:port", "host" into host and port (default
 * "443"). Returns 0 or -1. */
static int split_host_port(const char *s, size_t n, char **host, char **port) {
  const char *hs = s, *he, *ps = NULL;
  if (n == 0)
    return -1;
  if (s[0] == '[') {
    const char *rb = memchr(s, ']', n);
    if (!rb)
      return -1;
    hs = s + 1;
    he = rb;
    if (rb + 1 < s + n) {
      if (rb[1] != ':')
        return -1;
      ps = rb + 2;
    }
  } else {
    const char *colon = NULL;
    for (const char *p = s; p < s + n; p++)
      if (*p == ':') {
        if (colon) /* bare IPv6 without brackets: take it whole, no port */
          return -1;
        colon = p;
      }
    he = colon ? colon : s + n;
    if (colon)
      ps = colon + 1;
  }
  if (he == hs)
    return -1;
  if (ps && ps == s + n)
    return -1;
  if (ps)
    for (const char *p = ps; p < s + n; p++)
      if (*p < '0' || *p > '9')
        return -1;
  *host = dup_n(hs, (size_t)(he - hs));
  *port = ps ? dup_n(ps, (size_t)(s + n - ps)) : dup_n("443", 3);
  if (!*host || !*port) {
    free(*host);
    free(*port);
    return -1;
  }
  return 0;
}

size_t sluice__addr_print(const struct sockaddr *sa, sluice__addr_style style,
                          char *buf, size_t len) {
  char ip[INET6_ADDRSTRLEN] = "?";
  int n;
  buf[0] = '\0';
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    uv_ip6_name(s6, ip, sizeof ip);
    unsigned port = ntohs(s6->sin6_port);
    if (style == SLUICE__ADDR_HOST)
      n = snprintf(buf, len, "%s", ip);
    else
      n = snprintf(buf, len, "%s[%s]:%u",
                   style == SLUICE__ADDR_URI ? "ipv6:" : "", ip, port);
  } else if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    uv_ip4_name(s4, ip, sizeof ip);
    unsigned port = ntohs(s4->sin_port);
    if (style == SLUICE__ADDR_HOST)
      n = snprintf(buf, len, "%s", ip);
    else
      n = snprintf(buf, len, "%s%s:%u",
                   style == SLUICE__ADDR_URI ? "ipv4:" : "", ip, port);
  } else if (sa->sa_family == AF_UNIX) {
    const struct sockaddr_un *su = (const struct sockaddr_un *)sa;
    if (style == SLUICE__ADDR_HOST)
      return 0;
    n = snprintf(buf, len, "%s%.*s", style == SLUICE__ADDR_URI ? "unix:" : "",
                 (int)sizeof su->sun_path, su->sun_path);
  } else {
    return 0;
  }
  if (n < 0)
    return 0;
  return (size_t)n < len ? (size_t)n : len - 1;
}

void sluice__addr_format(sluice__addr *a) {
  sluice__addr_print((const struct sockaddr *)&a->ss, SLUICE__ADDR_HOSTPORT,
                     a->name, sizeof a->name);
}

/* The value of a port string of decimal digits (checked by
 * split_host_port), saturating at 65536: atoi() overflowed on long ones
 * ("4294967297" became port 1). */
static unsigned port_number(const char *s) {
  unsigned v = 0;
  for (; *s; s++) {
    v = v * 10 + (unsigned)(*s - '0');
    if (v > 65535)
      return 65536;
  }
  return v;
}

static int parse_static(const char *list, int v6, sluice__target *t) {
  size_t cap = 1;
  for (const char *p = list; *p; p++)
    cap += *p == ',';
  t->addrs = sluice__calloc(cap, sizeof *t->addrs);
  if (!t->addrs)
    return -1;
  const char *p = list;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char *host = NULL, *port = NULL;
    if (split_host_port(p, n, &host, &port) != 0)
      return -1;
    sluice__addr *a = &t->addrs[t->n_addrs];
    unsigned pn = port_number(port);
    int rv = v6 ? uv_ip6_addr(host, (int)pn, (struct sockaddr_in6 *)&a->ss)
                : uv_ip4_addr(host, (int)pn, (struct sockaddr_in *)&a->ss);
    int port_ok = pn > 0 && pn < 65536;
    free(host);
    free(port);
    if (rv != 0 || !port_ok)
      return -1;
    sluice__addr_format(a);
    t->n_addrs++;
    if (!e)
      break;
    p = e + 1;
  }
  if (t->n_addrs == 0)
    return -1;
  t->authority = sluice__strdup(t->addrs[0].name);
  return t->authority ? 0 : -1;
}

int sluice__target_parse(const char *text, sluice__target *t,
                         const char **reason) {
  memset(t, 0, sizeof *t);
  *reason = NULL;
  if (!text || !*text) {
    *reason = "empty target";
    return -1;
  }
  if (strncmp(text, "unix:", 5) == 0) {
    const char *path = text + 5;
    if (strncmp(path, "//", 2) == 0)
      path += 2; /* unix:///abs/path */
    if (!*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
      *reason = "unix: target needs a path shorter than 108 bytes";
      return -1;
    }
    t->kind = SLUICE__TARGET_UNIX;
    t->path = sluice__strdup(path);
    t->authority = sluice__strdup("localhost");
    if (!t->path || !t->authority)
      goto nomem;
    return 0;
  }
  if (strncmp(text, "unix-abstract:", 14) == 0) {
    /* Not a DNS name "unix-abstract" with a port: say what it is. */
    *reason = "unix-abstract: targets are not supported";
    return -1;
  }
  if (strncmp(text, "ipv4:", 5) == 0 || strncmp(text, "ipv6:", 5) == 0) {
    t->kind = SLUICE__TARGET_STATIC;
    if (parse_static(text + 5, text[3] == '6', t) != 0) {
      sluice__target_free(t);
      *reason = "bad address list (want ipv4:1.2.3.4:port,... or "
                "ipv6:[::1]:port,...)";
      return -1;
    }
    return 0;
  }
  const char *hp = text;
  if (strncmp(text, "dns:", 4) == 0) {
    hp = text + 4;
    if (strncmp(hp, "///", 3) == 0)
      hp += 3;
    else if (strncmp(hp, "//", 2) == 0) {
      *reason = "dns: with an authority (DNS server) is not supported";
      return -1;
    }
  }
  t->kind = SLUICE__TARGET_DNS;
  if (split_host_port(hp, strlen(hp), &t->host, &t->port) != 0) {
    *reason = "bad host:port";
    return -1;
  }
  size_t alen = strlen(t->host) + strlen(t->port) + 4;
  t->authority = sluice__malloc(alen);
  if (!t->authority)
    goto nomem;
  if (strchr(t->host, ':'))
    snprintf(t->authority, alen, "[%s]:%s", t->host, t->port);
  else
    snprintf(t->authority, alen, "%s:%s", t->host, t->port);
  return 0;
nomem:
  sluice__target_free(t);
  *reason = "out of memory";
  return -1;
}

void sluice__target_free(sluice__target *t) {
  free(t->host);
  free(t->port);
  free(t->authority);
  free(t->path);
  free(t->addrs);
  memset(t, 0, sizeof *t);
}

sluice__addr *sluice__addrs_from_ai(const struct addrinfo *ai, size_t *n) {
  size_t cap = 0;
  for (const struct addrinfo *p = ai; p; p = p->ai_next)
    cap++;
  *n = 0;
  if (!cap)
    return NULL;
  sluice__addr *v = sluice__calloc(cap, sizeof *v);
  if (!v)
    return NULL;
  for (const struct addrinfo *p = ai; p; p = p->ai_next) {
    if (p->ai_family != AF_INET && p->ai_family != AF_INET6)
      continue;
    sluice__addr a;
    memset(&a, 0, sizeof a);
    memcpy(&a.ss, p->ai_addr, p->ai_addrlen);
    sluice__addr_format(&a);
    int dup = 0;
    for (size_t i = 0; i < *n; i++)
      dup |= strcmp(v[i].name, a.name) == 0;
    if (!dup)
      v[(*n)++] = a;
  }
  if (*n == 0) {
    free(v);
    return NULL;
  }
  return v;
}

int sluice__addr_split_listen(const char *address, char *host, size_t host_cap,
                              const char **port) {
  const char *colon = strrchr(address, ':');
  if (!colon || colon == address || colon[1] == '\0' ||
      (size_t)(colon - address) >= host_cap)
    return -1;
  const char *hs = address;
  size_t hl = (size_t)(colon - address);
  if (hs[0] == '[' && hl >= 2 && hs[hl - 1] == ']') {
    hs++;
    hl -= 2;
  }
  for (const char *p = colon + 1; *p; p++)
    if (*p < '0' || *p > '9')
      return -1;
  memcpy(host, hs, hl);
  host[hl] = '\0';
  *port = colon + 1;
  return 0;
}
