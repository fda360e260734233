/* protoc-gen-sluice: identifier tables for collision checks. */
#include "symbols.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "printer.h"

void symtab_init(symtab *t) { memset(t, 0, sizeof *t); }

void symtab_free(symtab *t) {
  for (size_t i = 0; i < t->n; i++) {
    free(t->v[i].name);
    free(t->v[i].origin);
  }
  free(t->v);
  symtab_init(t);
}

const symbol *symtab_find(const symtab *t, const char *name) {
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->v[i].name, name) == 0)
      return &t->v[i];
  return NULL;
}

/* Takes over name; origin is copied. */
static void add(symtab *t, char *name, const char *origin) {
  char *o = origin ? str_printf("%s", origin) : NULL;
  if (name == NULL || o == NULL || t->failed) {
    t->failed = 1;
    free(name);
    free(o);
    return;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    symbol *v = realloc(t->v, cap * sizeof *v);
    if (v == NULL) {
      t->failed = 1;
      free(name);
      free(o);
      return;
    }
    t->v = v;
    t->cap = cap;
  }
  t->v[t->n].name = name;
  t->v[t->n].origin = o;
  t->n++;
}

/* add() with a formatted name. */
static void addf(symtab *t, const char *origin, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void addf(symtab *t, const char *origin, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  add(t, s, origin);
}

static char *join(const char *scope, const char *name) {
  return scope && scope[0] ? str_printf("%s.%s", scope, name)
                           : str_printf("%s", name);
}

static void add_enum(symtab *t, const char *scope,
                     const Google__Protobuf__EnumDescriptorProto *e) {
  if (e->name == NULL)
    return;
  char *full = join(scope, e->name);
  char *c = full ? names_full_to_c(full) : NULL;
  char *l = full ? names_full_to_lower(full) : NULL;
  char *origin = str_printf("protoc-c's names for enum %s", full ? full : "");
  if (c && l && origin) {
    addf(t, origin, "%s", c);
    addf(t, origin, "_%s", c);
    addf(t, origin, "%s__descriptor", l);
  } else {
    t->failed = 1;
  }
  free(full);
  free(c);
  free(l);
  free(origin);
}

static void add_message(symtab *t, const char *scope,
                        const Google__Protobuf__DescriptorProto *m) {
  if (m->name == NULL)
    return;
  char *full = join(scope, m->name);
  char *c = full ? names_full_to_c(full) : NULL;
  char *l = full ? names_full_to_lower(full) : NULL;
  char *origin =
      str_printf("protoc-c's names for message %s", full ? full : "");
  if (c && l && origin) {
    static const char *const funcs[] = {
        "init",   "get_packed_size", "pack",      "pack_to_buffer",
        "unpack", "free_unpacked",   "descriptor"};
    addf(t, origin, "%s", c);
    addf(t, origin, "_%s", c);
    addf(t, origin, "%s_Closure", c);
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
      addf(t, origin, "%s__%s", l, funcs[i]);
    for (size_t i = 0; i < m->n_nested_type; i++)
      add_message(t, full, m->nested_type[i]);
    for (size_t i = 0; i < m->n_enum_type; i++)
      add_enum(t, full, m->enum_type[i]);
  } else {
    t->failed = 1;
  }
  free(full);
  free(c);
  free(l);
  free(origin);
}

static void add_service(symtab *t, const char *package,
                        const Google__Protobuf__ServiceDescriptorProto *s) {
  if (s->name == NULL)
    return;
  char *full = join(package, s->name);
  char *c = full ? names_full_to_c(full) : NULL;
  char *l = full ? names_full_to_lower(full) : NULL;
  char *origin = str_printf("protoc-c's service API of %s", full ? full : "");
  if (c && l && origin) {
    addf(t, origin, "%s_Service", c);
    addf(t, origin, "_%s_Service", c);
    addf(t, origin, "%s_ServiceDestroy", c);
    addf(t, origin, "%s__init", l);
    addf(t, origin, "%s__descriptor", l);
    addf(t, origin, "%s__method_descriptors", l);
    addf(t, origin, "%s__method_indices_by_name", l);
    for (size_t i = 0; i < s->n_method; i++) {
      const char *mname = s->method[i]->name ? s->method[i]->name : "";
      char *lower = names_camel_to_lower(mname);
      char *morigin =
          str_printf("protoc-c's stub for method %s of %s", mname, full);
      if (lower && morigin)
        addf(t, morigin, "%s__%s", l, lower);
      else
        t->failed = 1;
      free(lower);
      free(morigin);
    }
  } else {
    t->failed = 1;
  }
  free(full);
  free(c);
  free(l);
  free(origin);
}

void symbols_add_protoc_c(symtab *t,
                          const Google__Protobuf__FileDescriptorProto *f) {
  for (size_t i = 0; i < f->n_message_type; i++)
    add_message(t, f->package, f->message_type[i]);
  for (size_t i = 0; i < f->n_enum_type; i++)
    add_enum(t, f->package, f->enum_type[i]);
  for (size_t i = 0; i < f->n_service; i++)
    add_service(t, f->package, f->service[i]);
}

/* The identifiers of a table (model.h); its borrowed service names are not
 * marked, so each is added once, with its service. */
static void add_vars(symtab *t, const model_vars *vars, const char *origin) {
  for (size_t i = 0; i < vars->n; i++)
    if (vars->ident[i])
      addf(t, origin, "%s", vars->v[i].value);
}

void symbols_add_sluice(symtab *t, const service_model *sm) {
  char *origin = str_printf("sluice's names for service %s", sm->full_name);
  if (origin == NULL) {
    t->failed = 1;
    return;
  }
  add_vars(t, &sm->vars, origin);
  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    char *morigin = str_printf("sluice's names for method %s of %s", mm->name,
                               sm->full_name);
    if (morigin == NULL) {
      t->failed = 1;
      continue;
    }
    add_vars(t, &mm->vars, morigin);
    free(morigin);
  }
  free(origin);
}
