/* protoc-gen-sluice: per-service naming model (see model.h). */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "printer.h"

/* ---- template variables */

static void vars_init(model_vars *t) { memset(t, 0, sizeof *t); }

static void vars_free(model_vars *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->owned[i]);
  vars_init(t);
}

/* Adds name = value; owned values are freed with the table (a NULL one is
 * out of memory). */
static void vars_put(model_vars *t, const char *name, const char *value,
                     char *owned, int ident) {
  if (t->failed || value == NULL || t->n == MODEL_MAX_VARS) {
    if (!t->failed && value != NULL) /* a generator bug, not the input */
      fputs("protoc-gen-sluice: internal error: MODEL_MAX_VARS is too small\n",
            stderr);
    t->failed = 1;
    free(owned);
    return;
  }
  t->v[t->n].name = name;
  t->v[t->n].value = value;
  t->ident[t->n] = (unsigned char)ident;
  t->owned[t->n] = owned;
  t->n++;
}

static void vars_text(model_vars *t, const char *name, const char *value) {
  vars_put(t, name, value, NULL, 0);
}

static void vars_fmt(model_vars *t, const char *name, int ident,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void vars_fmt(model_vars *t, const char *name, int ident,
                     const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  vars_put(t, name, s, s, ident);
}

static const char *kind_enum(sluice_call_kind k) {
  switch (k) {
  case SLUICE_CALL_CLIENT_STREAMING:
    return "SLUICE_CALL_CLIENT_STREAMING";
  case SLUICE_CALL_SERVER_STREAMING:
    return "SLUICE_CALL_SERVER_STREAMING";
  case SLUICE_CALL_BIDI_STREAMING:
    return "SLUICE_CALL_BIDI_STREAMING";
  case SLUICE_CALL_UNARY:
    break;
  }
  return "SLUICE_CALL_UNARY";
}

static const char *kind_words(sluice_call_kind k) {
  switch (k) {
  case SLUICE_CALL_CLIENT_STREAMING:
    return "client streaming";
  case SLUICE_CALL_SERVER_STREAMING:
    return "server streaming";
  case SLUICE_CALL_BIDI_STREAMING:
    return "bidirectional streaming";
  case SLUICE_CALL_UNARY:
    break;
  }
  return "unary";
}

/* The service's names. Identifiers (ident 1) are what gen_service defines
 * at file scope, static ones included: they share the translation unit
 * with protoc-c's header. */
static void service_vars(service_model *sm) {
  model_vars *t = &sm->vars;
  const char *s = sm->lower;
  vars_text(t, "full", sm->full_name);
  vars_text(t, "Svc", sm->c_name);
  vars_text(t, "svc", s);
  vars_fmt(t, "n", 0, "%zu", sm->n_methods);
  vars_fmt(t, "svc_methods", 1, "%s__sluice_methods", s);
  vars_fmt(t, "svc_service", 1, "%s__sluice_service", s);
  vars_fmt(t, "svc_register", 1, "%s__sluice_register", s);
  vars_fmt(t, "svc_files", 1, "%s__sluice_files", s);
  vars_fmt(t, "svc_dispatch", 1, "%s__sluice_dispatch", s);
  vars_fmt(t, "SvcHandlers", 1, "%s_SluiceHandlers", sm->c_name);
  if (!sm->any_streaming)
    return;
  /* The trampolines every streaming method of the service shares: their
   * callbacks have the same signature for every method. */
  vars_fmt(t, "svc_on_initial_metadata", 1, "%s__sluice_on_initial_metadata",
           s);
  vars_fmt(t, "svc_on_send_ready", 1, "%s__sluice_on_send_ready", s);
  vars_fmt(t, "svc_on_done", 1, "%s__sluice_on_done", s);
  vars_fmt(t, "svc_server_on_half_close", 1, "%s__sluice_server_on_half_close",
           s);
  vars_fmt(t, "svc_server_on_send_ready", 1, "%s__sluice_server_on_send_ready",
           s);
  vars_fmt(t, "svc_server_on_done", 1, "%s__sluice_server_on_done", s);
}

/* The method's names, after its service's (borrowed). */
static void method_vars(method_model *mm, const service_model *sm,
                        size_t index) {
  model_vars *t = &mm->vars;
  for (size_t i = 0; i < sm->vars.n; i++)
    vars_text(t, sm->vars.v[i].name, sm->vars.v[i].value);
  const char *s = sm->lower, *S = sm->c_name, *m = mm->lower, *M = mm->name;
  vars_text(t, "M", M);
  vars_text(t, "m", m);
  vars_text(t, "member", mm->member);
  vars_text(t, "path", mm->path);
  vars_text(t, "In", mm->in_type);
  vars_text(t, "Out", mm->out_type);
  vars_text(t, "in_desc", mm->in_desc);
  vars_text(t, "out_desc", mm->out_desc);
  vars_text(t, "kind", kind_words(mm->kind));
  vars_text(t, "KIND", kind_enum(mm->kind));
  vars_fmt(t, "i", 0, "%zu", index);
  vars_fmt(t, "timeout_ms", 0, "%llu",
           (unsigned long long)mm->defaults.default_timeout_ms);
  vars_fmt(t, "max_request", 0, "%lu",
           (unsigned long)mm->defaults.max_request_size);
  vars_fmt(t, "max_response", 0, "%lu",
           (unsigned long)mm->defaults.max_response_size);

  if (mm->defaults.has_config) {
    vars_fmt(t, "config_var", 1, "%s__%s__sluice_config", s, m);
    vars_fmt(t, "config", 0, "&%s__%s__sluice_config", s, m);
  } else {
    vars_text(t, "config", "NULL");
  }

  vars_fmt(t, "Handler", 1, "%s__%s_Handler", S, M);
  vars_fmt(t, "dispatch", 1, "%s__%s__sluice_dispatch", s, m);
  if (mm->kind == SLUICE_CALL_UNARY) {
    vars_fmt(t, "Cb", 1, "%s__%s_Cb", S, M);
    vars_fmt(t, "async", 1, "%s__%s__async", s, m);
    vars_fmt(t, "blocking", 1, "%s__%s__blocking", s, m);
    vars_fmt(t, "tramp", 1, "%s__%s__sluice_tramp", s, m);
  } else {
    vars_fmt(t, "start", 1, "%s__%s__start", s, m);
    vars_fmt(t, "Handlers", 1, "%s__%s_Handlers", S, M);
    vars_fmt(t, "on_message", 1, "%s__%s__sluice_on_message", s, m);
    vars_fmt(t, "tramps", 1, "%s__%s__sluice_tramps", s, m);
    vars_fmt(t, "ServerHandlers", 1, "%s__%s_ServerHandlers", S, M);
    vars_fmt(t, "set_handlers", 1, "%s__%s__set_handlers", s, m);
    vars_fmt(t, "server_on_message", 1, "%s__%s__sluice_server_on_message", s,
             m);
    vars_fmt(t, "server_tramps", 1, "%s__%s__sluice_server_tramps", s, m);
  }
  if (sluice_call_kind_streams_requests(mm->kind))
    vars_fmt(t, "send", 1, "%s__%s__send", s, m);
  if (sluice_call_kind_streams_responses(mm->kind))
    vars_fmt(t, "send_response", 1, "%s__%s__send_response", s, m);
  else
    vars_fmt(t, "reply", 1, "%s__%s__reply", s, m);
}

/* ---- the model */

static void method_model_free(method_model *mm) {
  vars_free(&mm->vars);
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
  mm->kind = cs && ss ? SLUICE_CALL_BIDI_STREAMING
             : cs     ? SLUICE_CALL_CLIENT_STREAMING
             : ss     ? SLUICE_CALL_SERVER_STREAMING
                      : SLUICE_CALL_UNARY;

  char *why = NULL;
  if (options_read_method(m->options, &mm->defaults, &why) != 0) {
    *err = str_printf("%s.%s: %s", service_full, m->name,
                      why ? why : "out of memory");
    free(why);
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
    if (sm->methods[i].kind != SLUICE_CALL_UNARY)
      sm->any_streaming = 1;
  }
  service_vars(sm);
  int failed = sm->vars.failed;
  for (size_t i = 0; i < sm->n_methods; i++) {
    method_vars(&sm->methods[i], sm, i);
    failed |= sm->methods[i].vars.failed;
  }
  if (failed)
    goto nomem;
  return 0;
nomem:
  *err = str_printf("out of memory");
  return -1;
}

void service_model_free(service_model *sm) {
  for (size_t i = 0; i < sm->n_methods; i++)
    method_model_free(&sm->methods[i]);
  free(sm->methods);
  vars_free(&sm->vars);
  free(sm->full_name);
  free(sm->c_name);
  free(sm->lower);
  memset(sm, 0, sizeof *sm);
}
