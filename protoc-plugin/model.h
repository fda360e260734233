/* protoc-gen-sluice: the names and facts the generator needs per service,
 * computed once so that the header, the source and the collision check all
 * use the very same strings. */
#ifndef SLUICE_PLUGIN_MODEL_H
#define SLUICE_PLUGIN_MODEL_H

#include <stddef.h>

#include "google/protobuf/descriptor.pb-c.h"
#include "options.h"

typedef enum method_kind {
  KIND_UNARY,
  KIND_CLIENT_STREAMING,
  KIND_SERVER_STREAMING,
  KIND_BIDI_STREAMING
} method_kind;

typedef struct method_model {
  const char *name; /* "SayHello" (borrowed from the request) */
  char *lower;      /* protoc-c's CamelToLower: "say_hello" */
  char *member;     /* handler member: lower, '_' appended to a keyword */
  char *path;       /* "/helloworld.Greeter/SayHello" */
  char *in_type;    /* "Helloworld__HelloRequest" */
  char *out_type;   /* "Helloworld__HelloReply" */
  char *in_desc;    /* "helloworld__hello_request__descriptor" */
  char *out_desc;
  method_kind kind;
  method_defaults defaults;
} method_model;

typedef struct service_model {
  char *full_name; /* "helloworld.Greeter" */
  char *c_name;    /* "Helloworld__Greeter" */
  char *lower;     /* "helloworld__greeter" */
  size_t n_methods;
  method_model *methods;
} service_model;

/* Builds the model of service s of a file in package (NULL or "" for
 * none). Returns 0, or -1 with *err a malloc()ed reason that names the
 * method (the caller adds the file name and frees it). */
int service_model_build(service_model *sm, const char *package,
                        const Google__Protobuf__ServiceDescriptorProto *s,
                        char **err);

/* Frees what service_model_build allocated. */
void service_model_free(service_model *sm);

#endif
