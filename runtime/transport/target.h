/* Channel targets: parsing "host:port", "dns:host:port", "ipv4:a:p,a:p",
 * "ipv6:[a]:p,...", "unix:/path" and resolving names asynchronously. */
#ifndef SLUICE_TRANSPORT_TARGET_H
#define SLUICE_TRANSPORT_TARGET_H

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
  char *host;          /* DNS: the name to resolve */
  char *port;          /* DNS: the port (service) string */
  char *authority;     /* default :authority */
  char *path;          /* UNIX: the socket path */
  sluice__addr *addrs; /* STATIC: the addresses */
  size_t n_addrs;
} sluice__target;

/* Parses text into *t (zeroed first). Returns 0, or -1 with *reason set to a
 * static description. The default port is 443, as gRPC's. */
int sluice__target_parse(const char *text, sluice__target *t,
                         const char **reason);

/* Frees what t owns. */
void sluice__target_free(sluice__target *t);

/* Fills a->name from a->ss. */
void sluice__addr_format(sluice__addr *a);

/* Converts a getaddrinfo result list to an array of unique addresses
 * (malloc'd; *n set). Returns NULL on no address or no memory. */
sluice__addr *sluice__addrs_from_ai(const struct addrinfo *ai, size_t *n);

#endif
