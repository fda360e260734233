/* protoc-gen-sluice: the C identifiers a .proto file turns into, ours and
 * protoc-c's, so that a clash is reported by the plugin (naming the file,
 * service and method) instead of by the C compiler much later. */
#ifndef SLUICE_PLUGIN_SYMBOLS_H
#define SLUICE_PLUGIN_SYMBOLS_H

#include <stddef.h>

#include "google/protobuf/descriptor.pb-c.h"
#include "model.h"

typedef struct symbol {
  char *name;   /* the C identifier */
  char *origin; /* who emits it, for messages: "protoc-c's ... of X" */
} symbol;

typedef struct symtab {
  symbol *v;
  size_t n, cap;
  int failed; /* an allocation failed; the table is incomplete */
} symtab;

/* Starts an empty table. */
void symtab_init(symtab *t);

/* Frees the table and its strings. */
void symtab_free(symtab *t);

/* The first entry called name, or NULL. */
const symbol *symtab_find(const symtab *t, const char *name);

/* Adds the file-scope identifiers protoc-c emits for f: message and enum
 * types with their functions and descriptors, and its generic service API
 * (one function per method, __init, __descriptor ...). Macros are left
 * out: they are upper case and ours never are. */
void symbols_add_protoc_c(symtab *t,
                          const Google__Protobuf__FileDescriptorProto *f);

/* Adds every identifier gen_service emits for sm: the variables its model
 * marks as identifiers (static ones included: they share the translation
 * unit with protoc-c's header). */
void symbols_add_sluice(symtab *t, const service_model *sm);

#endif
