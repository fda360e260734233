/* protoc-gen-sluice: per-service naming model (see model.h). */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "printer.h"

static void method_model_free(method_model *mm) {
  free(mm->lower);
  free(mm->member);
  free(mm->path);
  free(mm->in_type);
  free(mm->out_type);
  free(mm->in_desc);
  free(mm->out_desc);
}

/* Fills the C names of a message type from its resolved name
 * (".pkg.Outer.Inner"), as protoc-c names the struct and the descriptor. */
static int type_names(const char *type, char **c_type, char **desc) {
  *c_type = names_full_to_c(type);
  char *lower = names_full_to_lower(type);
  *desc = lower ? str_printf("%s__descriptor", lower) : NULL;
  free(lower);
  return (*c_type && *desc) ? 0 : -1;
}

static int method_model_build(method_model *mm, const char *service_full,
                              const Google__Protobuf__MethodDescriptorProto *m,
                              char **err) {
  memset(mm, 0, sizeof *mm);
  mm->name = m->name;
  if (m->name == NULL || m->name[0] == '\0' || m->input_type == NULL ||
      m->output_type == NULL) {
    *err = str_printf("a method of %s has no name or no types", service_full);
    return -1;
  }
  /* protoc always resolves type names to ".full.Name"; anything else means
   * a request we do not understand, and guessing a C name would only move the
   * error to the C compiler. */
  if (m->input_type[0] != '.' || m->output_type[0] != '.') {
    *err = str_printf("%s.%s: unresolved message type", service_full, m->name);
    return -1;
  }
  mm->lower = names_camel_to_lower(m->name);
  if (mm->lower == NULL)
    goto nomem;
  mm->member = names_is_keyword(mm->lower) ? str_printf("%s_", mm->lower)
                                           : str_printf("%s", mm->lower);
  mm->path = str_printf("/%s/%s", service_full, m->name);
  if (mm->member == NULL || mm->path == NULL ||
      type_names(m->input_type, &mm->in_type, &mm->in_desc) != 0 ||
      type_names(m->output_type, &mm->out_type, &mm->out_desc) != 0)
    goto nomem;

  int cs = m->has_client_streaming && m->client_streaming;
  int ss = m->has_server_streaming && m->server_streaming;
  mm->kind = cs && ss ? KIND_BIDI_STREAMING
             : cs     ? KIND_CLIENT_STREAMING
             : ss     ? KIND_SERVER_STREAMING
                      : KIND_UNARY;

  const char *why = NULL;
  if (options_read_method(m->options, &mm->defaults, &why) != 0) {
    *err = str_printf("%s.%s: %s", service_full, m->name, why);
    return -1;
  }
  return 0;
nomem:
  *err = str_printf("out of memory");
  return -1;
}

int service_model_build(service_model *sm, const char *package,
                        const Google__Protobuf__ServiceDescriptorProto *s,
                        char **err) {
  memset(sm, 0, sizeof *sm);
  *err = NULL;
  if (s->name == NULL || s->name[0] == '\0') {
    *err = str_printf("a service has no name");
    return -1;
  }
  sm->full_name = package && package[0] ? str_printf("%s.%s", package, s->name)
                                        : str_printf("%s", s->name);
  if (sm->full_name == NULL)
    goto nomem;
  sm->c_name = names_full_to_c(sm->full_name);
  sm->lower = names_full_to_lower(sm->full_name);
  sm->methods = calloc(s->n_method ? s->n_method : 1, sizeof *sm->methods);
  if (sm->c_name == NULL || sm->lower == NULL || sm->methods == NULL)
    goto nomem;
  for (size_t i = 0; i < s->n_method; i++) {
    if (method_model_build(&sm->methods[i], sm->full_name, s->method[i], err) !=
        0) {
      sm->n_methods = i + 1; /* free the partly built one too */
      return -1;
    }
    sm->n_methods = i + 1;
  }
  return 0;
nomem:
  *err = str_printf("out of memory");
  return -1;
}

void service_model_free(service_model *sm) {
  for (size_t i = 0; i < sm->n_methods; i++)
    method_model_free(&sm->methods[i]);
  free(sm->methods);
  free(sm->full_name);
  free(sm->c_name);
  free(sm->lower);
  memset(sm, 0, sizeof *sm);
}
