/* Addresses, client and server: parsing channel targets ("host:port",
 * "dns:host:port", "ipv4:a:p,a:p", "ipv6:[a]:p,...", "unix:/path"),
 * parsing a listener's "host:port", and formatting a socket address in the
 * three forms sluice shows ("1.2.3.4:5" for destinations, "ipv4:1.2.3.4:5"
 * for peers, "1.2.3.4" for TLS names).
 *
 * No I/O: name resolution happens elsewhere (the channel calls getaddrinfo
 * and hands the result to sluice__addrs_from_ai). Every function is
 * reentrant and may run on any thread; none keeps state between calls.
 * Failures are reported as -1 (or NULL) with, where given, a static
 * description in *reason. */
#ifndef SLUICE_TRANSPORT_ADDR_H
#define SLUICE_TRANSPORT_ADDR_H

#include <stddef.h>
#include <uv.h>

typedef enum {
  SLUICE__TARGET_DNS,    /* host + port, resolved (again) with getaddrinfo */
  SLUICE__TARGET_STATIC, /* fixed IP addresses */
  SLUICE__TARGET_UNIX    /* one Unix socket path */
} sluice__target_kind;

typedef struct sluice__addr {
  struct sockaddr_storage ss;
  char name[112]; /* "127.0.0.1:50051", "[::1]:50051" or the unix path */
} sluice__addr;

typedef struct sluice__target {
  sluice__target_kind kind;
  char *host;          /* DNS: the name to resolve (IPv6 without brackets) */
  char *port;          /* DNS: the port (service) string, "443" if none */
  char *authority;     /* default :authority */
  char *path;          /* UNIX: the socket path */
  sluice__addr *addrs; /* STATIC: the addresses */
  size_t n_addrs;
} sluice__target;

/* Parses text into *t (zeroed first; its strings and array are malloc'd and
 * owned by t, see sluice__target_free). Returns 0, or -1 with *reason set to
 * a static description and nothing left to free in t:
 *  - "empty target" (NULL or "");
 *  - "unix: target needs a path shorter than 108 bytes" ("unix:",
 *    "unix://" with nothing after, or a path too long for sun_path);
 *  - "unix-abstract: targets are not supported";
 *  - "bad address list (want ipv4:1.2.3.4:port,... or ipv6:[::1]:port,...)"
 *    (an ipv4:/ipv6: list with a bad address, a port outside 1..65535, an
 *    empty item or no item);
 *  - "dns: with an authority (DNS server) is not supported" ("dns://x/...");
 *  - "bad host:port" (empty host or port, a non-digit port, an unbracketed
 *    IPv6 address, a missing ']');
 *  - "out of memory".
 * The default port is 443, as gRPC's. "unix:///abs" is "unix:/abs". */
int sluice__target_parse(const char *text, sluice__target *t,
                         const char **reason);

/* Frees what t owns and zeroes it (idempotent). */
void sluice__target_free(sluice__target *t);

/* How sluice__addr_print writes an address. */
typedef enum {
  SLUICE__ADDR_HOSTPORT, /* "1.2.3.4:5", "[::1]:5"; a Unix socket's path */
  SLUICE__ADDR_URI,      /* "ipv4:1.2.3.4:5", "ipv6:[::1]:5", "unix:path" */
  SLUICE__ADDR_HOST      /* "1.2.3.4", "::1"; "" for a Unix socket */
} sluice__addr_style;

/* Writes sa (AF_INET, AF_INET6 or AF_UNIX; sa_family read first, then the
 * matching struct) into buf (len bytes, len >= 1) in the given style,
 * NUL-terminated and truncated to fit. An unknown family writes "". Returns
 * the length written (without the NUL). */
size_t sluice__addr_print(const struct sockaddr *sa, sluice__addr_style style,
                          char *buf, size_t len);

/* Fills a->name from a->ss (SLUICE__ADDR_HOSTPORT). */
void sluice__addr_format(sluice__addr *a);

/* Converts a getaddrinfo result list to an array of unique IPv4 and IPv6
 * addresses in list order, names filled (malloc'd, the caller's; *n set).
 * Returns NULL (*n 0) when there is no such address or no memory. */
sluice__addr *sluice__addrs_from_ai(const struct addrinfo *ai, size_t *n);

/* Splits a listener address "host:port" or "[v6]:port" at its last ':'
 * (so a bare IPv6 address works too: "::1:50051"). The host, brackets
 * removed, is copied NUL-terminated into host (host_cap bytes); "" (from
 * "[]:port") means every interface. *port points into address at the port
 * (decimal digits only; its range is left to getaddrinfo). Returns 0, or -1
 * (host and *port unspecified) with no ':', nothing before the last ':',
 * nothing or a non-digit after it, or a host of host_cap bytes or more. */
int sluice__addr_split_listen(const char *address, char *host, size_t host_cap,
                              const char **port);

#endif
