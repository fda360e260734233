/* The library's server reflection (grpc.reflection.v1 and v1alpha
 * ServerReflection/ServerReflectionInfo): an index of the serialized
 * FileDescriptorProtos it was given (their names, imports, symbols and
 * extensions), read-only once the server starts, and the bidi streams that
 * query it. The messages are read and written as raw protobuf (wire.c-like
 * helpers here), so the runtime carries no generated code for them. A leaf
 * above route.c: server.c creates it, feeds it descriptors and registers
 * its routes at start. */
#ifndef SLUICE_SERVER_REFLECTION_H
#define SLUICE_SERVER_REFLECTION_H

#include <stddef.h>

#include "server/route.h"
#include "sluice/server.h"

typedef struct sluice__reflection sluice__reflection;

/* An index holding the library's own files (health, reflection). Returns
 * 0 or SLUICE_ERR_NOMEM. */
int sluice__reflection_new(sluice__reflection **out);
void sluice__reflection_del(sluice__reflection *r);
/* Indexes n files (borrowed); a file whose name is known already is
 * skipped. Returns 0, SLUICE_ERR_INVALID_ARG (one does not parse; none is
 * added) or SLUICE_ERR_NOMEM. */
int sluice__reflection_add(sluice__reflection *r,
                           const sluice_file_descriptor *files, size_t n);
/* Registers the two services' routes in r, each unless the application
 * registered one of that name; list_services answers the services of
 * routes. Returns 0 or SLUICE_ERR_NOMEM. */
int sluice__reflection_register(sluice__reflection *r, sluice__routes *routes,
                                const sluice_server_opts *o);

#endif
