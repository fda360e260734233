/* protoc-gen-sluice: the names and facts the generator needs per service,
 * computed once so that the header, the source and the collision check all
 * use the very same strings.
 *
 * They are kept as template variables (printer.h): gen_service prints
 * $start$, $Handlers$ ..., never puts an identifier together itself, and
 * symbols.c checks every variable marked as an identifier. A new generated
 * name is therefore a new variable here, and so in the collision check. */
#ifndef SLUICE_PLUGIN_MODEL_H
#define SLUICE_PLUGIN_MODEL_H

#include <stddef.h>

#include "google/protobuf/descriptor.pb-c.h"
#include "options.h"
#include "printer.h"
#include "sluice/method.h"

/* More than a method or service defines (service's included). */
#define MODEL_MAX_VARS 64

/* The template variables of a service or a method. A method's table holds
 * its service's variables too (borrowed, not marked), so one table serves
 * every template of the method. */
typedef struct model_vars {
  printer_var v[MODEL_MAX_VARS + 1];   /* ends with a NULL name */
  unsigned char ident[MODEL_MAX_VARS]; /* v[i] is a C identifier we define */
  char *owned[MODEL_MAX_VARS];         /* values to free */
  size_t n;
  int failed; /* out of memory, or the table is too small */
} model_vars;

typedef struct method_model {
  const char *name; /* "SayHello" (borrowed from the request) */
  char *lower;      /* protoc-c's CamelToLower: "say_hello" */
  char *member;     /* handler member: lower, '_' appended to a keyword */
  char *path;       /* "/helloworld.Greeter/SayHello" */
  char *in_type;    /* "Helloworld__HelloRequest" */
  char *out_type;   /* "Helloworld__HelloReply" */
  char *in_desc;    /* "helloworld__hello_request__descriptor" */
  char *out_desc;
  sluice_call_kind kind; /* as the runtime's tables name it */
  method_defaults defaults;
  /* Everything above and the identifiers of the method (see model.c). */
  model_vars vars;
} method_model;

typedef struct service_model {
  char *full_name; /* "helloworld.Greeter" */
  char *c_name;    /* "Helloworld__Greeter" */
  char *lower;     /* "helloworld__greeter" */
  size_t n_methods;
  method_model *methods;
  int any_streaming; /* some method streams: the shared trampolines exist */
  /* The names above and the identifiers of the service (see model.c). */
  model_vars vars;
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
