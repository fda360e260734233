/* The library's grpc.health.v1.Health service (Check, Watch): a table of
 * serving statuses by name and the Watch streams told of their changes.
 * Thread-safe (one mutex); the Watch calls live on their loops and are
 * only sent to and finished through the public server-call API, which may
 * be called from any thread. A leaf above route.c: server.c creates it,
 * registers its routes at start and shuts it down before the GOAWAY. */
#ifndef SLUICE_SERVER_HEALTH_H
#define SLUICE_SERVER_HEALTH_H

#include <stdint.h>

#include "server/route.h"
#include "sluice/server.h"

typedef struct sluice__health sluice__health;

/* A table with "" SERVING. Returns 0 or SLUICE_ERR_NOMEM. */
int sluice__health_new(sluice__health **out);
/* Frees it (every Watch call is gone: the server's loops are). */
void sluice__health_del(sluice__health *h);
/* name becomes SERVING unless it has a status already (a registered
 * service). Returns 0 or SLUICE_ERR_NOMEM. */
int sluice__health_add_default(sluice__health *h, const char *name);
/* Sets name's status (SERVING or NOT_SERVING) and tells its watchers.
 * Returns 0, SLUICE_ERR_STATE after shutdown, or SLUICE_ERR_NOMEM. */
int sluice__health_set(sluice__health *h, const char *name,
                       sluice_serving_status status);
/* Registers the service's two routes in r (bypass: they skip admission),
 * unless the application registered a service of that name. Returns 0 or
 * SLUICE_ERR_NOMEM. */
int sluice__health_register(sluice__health *h, sluice__routes *r,
                            const sluice_server_opts *o);
/* Shutdown: every name NOT_SERVING for good; each Watch stream is sent
 * that and finished (UNAVAILABLE "server shutting down"); waits up to
 * wait_ms for those streams to be over (their status sent), so that the
 * GOAWAY that follows comes after it. Any thread but a server loop's. */
void sluice__health_shutdown(sluice__health *h, uint64_t wait_ms);

#endif
