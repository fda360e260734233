/* protoc-gen-sluice: per-service code generation (see gen_service.h). */
#include "gen_service.h"

static const char *kind_enum(method_kind k) {
  switch (k) {
  case KIND_CLIENT_STREAMING:
    return "SLUICE_CALL_CLIENT_STREAMING";
  case KIND_SERVER_STREAMING:
    return "SLUICE_CALL_SERVER_STREAMING";
  case KIND_BIDI_STREAMING:
    return "SLUICE_CALL_BIDI_STREAMING";
  case KIND_UNARY:
    break;
  }
  return "SLUICE_CALL_UNARY";
}

/* ---- header */

static void header_client(printer *p, const service_model *sm,
                          const method_model *mm) {
  printer_printf(
      p,
      "/* Completion of %s. Runs exactly once, on the channel's loop thread.\n"
      " * st is borrowed until the callback returns. resp is the response "
      "when\n"
      " * st->code is OK, else NULL; the library owns it and frees it after "
      "the\n"
      " * callback returns (copy what you keep). */\n"
      "typedef void (*%s__%s_Cb)(const sluice_status *st,\n"
      "    const %s *resp, void *user_data);\n\n",
      mm->path, sm->c_name, mm->name, mm->out_type);
  printer_printf(
      p,
      "/* Starts a %s call. req is serialized before this returns\n"
      " * (the caller keeps it); opts may be NULL. cb fires exactly once, "
      "never\n"
      " * from inside this function. Returns 0 when cb will fire, else\n"
      " * SLUICE_ERR_INVALID_ARG (a NULL argument) or SLUICE_ERR_NOMEM, as\n"
      " * sluice_unary_call(). Thread-safe. */\n"
      "int %s__%s__async(sluice_channel *ch, const %s *req,\n"
      "    const sluice_call_opts *opts, %s__%s_Cb cb, void *user_data);\n\n",
      mm->path, sm->lower, mm->lower, mm->in_type, sm->c_name, mm->name);
  printer_printf(
      p,
      "/* Calls %s and waits on the caller's thread (never call it\n"
      " * on a loop thread). On return *status holds the outcome (the caller\n"
      " * owns it: sluice_status_clear(); status may be NULL) and, when the "
      "code\n"
      " * is OK, *resp the response, owned by the caller: free it with\n"
      " * protobuf_c_message_free_unpacked(&(*resp)->base, NULL). Returns the\n"
      " * status code, as sluice_unary_call_blocking(). */\n"
      "sluice_status_code %s__%s__blocking(sluice_channel *ch,\n"
      "    const %s *req, %s **resp,\n"
      "    const sluice_call_opts *opts, sluice_status *status);\n\n",
      mm->path, sm->lower, mm->lower, mm->in_type, mm->out_type);
}

static void header_server(printer *p, const service_model *sm,
                          const method_model *mm) {
  printer_printf(
      p,
      "/* Server handler of %s. Runs on the loop thread of the call's\n"
      " * connection; req is borrowed until the call is finished. The handler\n"
      " * finishes the call exactly once, now or later from any thread, with\n"
      " * %s__%s__reply() or sluice_server_call_finish(). */\n"
      "typedef void (*%s__%s_Handler)(sluice_server_call *call,\n"
      "    const %s *req, void *user_data);\n\n",
      mm->path, sm->lower, mm->lower, sm->c_name, mm->name, mm->in_type);
  printer_printf(
      p,
      "/* Finishes a %s call with status OK and resp (serialized\n"
      " * before this returns; the caller keeps resp). Any thread, once per\n"
      " * call. Returns 0 or SLUICE_ERR_INVALID_ARG (call or resp NULL), as\n"
      " * sluice_server_call_reply(). */\n"
      "int %s__%s__reply(sluice_server_call *call, const %s *resp);\n\n",
      mm->path, sm->lower, mm->lower, mm->out_type);
}

void gen_service_header(printer *p, const service_model *sm) {
  printer_printf(p, "/* ---- service %s */\n\n", sm->full_name);
  if (sm->n_methods > 0)
    printer_printf(p,
                   "/* The methods of %s in .proto order, with their\n"
                   " * (sluice.method) defaults; static, for the whole "
                   "program. */\n"
                   "extern const sluice_method_desc %s__sluice_methods[%zu];\n",
                   sm->full_name, sm->lower, sm->n_methods);
  printer_printf(p,
                 "/* The service table of %s, as the runtime reads it. */\n"
                 "extern const sluice_service_desc %s__sluice_service;\n\n",
                 sm->full_name, sm->lower);

  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    if (mm->kind == KIND_UNARY) {
      header_client(p, sm, mm);
      header_server(p, sm, mm);
    }
  }

  printer_printf(p,
                 "/* The server handlers of %s, one per unary method; a NULL\n"
                 " * member answers UNIMPLEMENTED. Streaming methods have no\n"
                 " * member yet. */\n"
                 "typedef struct %s_SluiceHandlers {\n",
                 sm->full_name, sm->c_name);
  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    if (mm->kind == KIND_UNARY)
      printer_printf(p, "  %s__%s_Handler %s;\n", sm->c_name, mm->name,
                     mm->member);
  }
  if (sm->n_unary == 0) /* C has no empty structs */
    printer_printf(p, "  char sluice_unused_;\n");
  printer_printf(p, "} %s_SluiceHandlers;\n\n", sm->c_name);

  printer_printf(
      p,
      "/* Registers %s on srv, before sluice_server_start().\n"
      " * *handlers is copied; user_data is passed to every handler. Returns "
      "0,\n"
      " * SLUICE_ERR_INVALID_ARG (srv or handlers NULL), "
      "SLUICE_ERR_DUPLICATE,\n"
      " * SLUICE_ERR_STATE or SLUICE_ERR_NOMEM, as "
      "sluice_server_add_service(). "
      "*/\n"
      "int %s__sluice_register(sluice_server *srv,\n"
      "    const %s_SluiceHandlers *handlers, void *user_data);\n\n",
      sm->full_name, sm->lower, sm->c_name);
}

/* ---- source */

static void source_method(printer *p, const service_model *sm,
                          const method_model *mm, size_t index) {
  /* The runtime calls back through one generic signature; the trampoline
   * turns it back into the user's typed callback so that no function is
   * called through a pointer of the wrong type. */
  printer_printf(p,
                 "static void %s__%s__sluice_tramp(const sluice_status *st,\n"
                 "    const ProtobufCMessage *resp, sluice_generic_fn cb,\n"
                 "    void *user_data) {\n"
                 "  ((%s__%s_Cb)cb)(st, (const %s *)resp, user_data);\n"
                 "}\n\n",
                 sm->lower, mm->lower, sm->c_name, mm->name, mm->out_type);
  printer_printf(
      p,
      "int %s__%s__async(sluice_channel *ch, const %s *req,\n"
      "    const sluice_call_opts *opts, %s__%s_Cb cb, void *user_data) {\n"
      "  /* NULL goes through: the runtime reports it as INVALID_ARG. */\n"
      "  return sluice_unary_call_tramp(ch, &%s__sluice_methods[%zu],\n"
      "      req ? &req->base : NULL, opts, %s__%s__sluice_tramp,\n"
      "      (sluice_generic_fn)cb, user_data);\n"
      "}\n\n",
      sm->lower, mm->lower, mm->in_type, sm->c_name, mm->name, sm->lower, index,
      sm->lower, mm->lower);
  printer_printf(p,
                 "sluice_status_code %s__%s__blocking(sluice_channel *ch,\n"
                 "    const %s *req, %s **resp,\n"
                 "    const sluice_call_opts *opts, sluice_status *status) {\n"
                 "  ProtobufCMessage *msg = NULL;\n"
                 "  sluice_status_code code = sluice_unary_call_blocking(ch,\n"
                 "      &%s__sluice_methods[%zu], req ? &req->base : NULL,\n"
                 "      resp ? &msg : NULL, opts, status);\n"
                 "  if (resp)\n"
                 "    *resp = (%s *)msg;\n"
                 "  return code;\n"
                 "}\n\n",
                 sm->lower, mm->lower, mm->in_type, mm->out_type, sm->lower,
                 index, mm->out_type);
  printer_printf(
      p,
      "static void %s__%s__sluice_dispatch(sluice_server_call *call,\n"
      "    const ProtobufCMessage *req, const void *handlers,\n"
      "    void *user_data) {\n"
      "  const %s_SluiceHandlers *h = handlers;\n"
      "  if (h == NULL || h->%s == NULL) {\n"
      "    (void)sluice_server_call_finish(call, SLUICE_STATUS_UNIMPLEMENTED,\n"
      "                                    \"method not implemented\", NULL);\n"
      "    return;\n"
      "  }\n"
      "  h->%s(call, (const %s *)req, user_data);\n"
      "}\n\n",
      sm->lower, mm->lower, sm->c_name, mm->member, mm->member, mm->in_type);
  printer_printf(p,
                 "int %s__%s__reply(sluice_server_call *call, const %s *resp) "
                 "{\n"
                 "  return sluice_server_call_reply(call, resp ? &resp->base : "
                 "NULL);\n"
                 "}\n\n",
                 sm->lower, mm->lower, mm->out_type);
}

void gen_service_source(printer *p, const service_model *sm) {
  printer_printf(p, "/* ---- service %s */\n\n", sm->full_name);
  if (sm->n_methods > 0) {
    printer_printf(p, "const sluice_method_desc %s__sluice_methods[%zu] = {\n",
                   sm->lower, sm->n_methods);
    for (size_t i = 0; i < sm->n_methods; i++) {
      const method_model *mm = &sm->methods[i];
      printer_printf(p,
                     "    {\"%s\", \"%s\", &%s, &%s, %s,\n"
                     "     UINT64_C(%llu), UINT32_C(%lu), UINT32_C(%lu)},\n",
                     mm->path, mm->name, mm->in_desc, mm->out_desc,
                     kind_enum(mm->kind),
                     (unsigned long long)mm->defaults.default_timeout_ms,
                     (unsigned long)mm->defaults.max_request_size,
                     (unsigned long)mm->defaults.max_response_size);
    }
    printer_printf(p, "};\n\n");
  }
  if (sm->n_methods > 0)
    printer_printf(p,
                   "const sluice_service_desc %s__sluice_service = {\"%s\", "
                   "%zu,\n    %s__sluice_methods};\n\n",
                   sm->lower, sm->full_name, sm->n_methods, sm->lower);
  else
    printer_printf(p,
                   "const sluice_service_desc %s__sluice_service = {\"%s\", "
                   "0, NULL};\n\n",
                   sm->lower, sm->full_name);

  for (size_t i = 0; i < sm->n_methods; i++)
    if (sm->methods[i].kind == KIND_UNARY)
      source_method(p, sm, &sm->methods[i], i);

  if (sm->n_methods > 0) {
    /* Streaming methods get no dispatch yet: NULL answers UNIMPLEMENTED. */
    printer_printf(p,
                   "static const sluice_unary_dispatch "
                   "%s__sluice_dispatch[%zu] = {\n",
                   sm->lower, sm->n_methods);
    for (size_t i = 0; i < sm->n_methods; i++) {
      const method_model *mm = &sm->methods[i];
      if (mm->kind == KIND_UNARY)
        printer_printf(p, "    %s__%s__sluice_dispatch,\n", sm->lower,
                       mm->lower);
      else
        printer_printf(p, "    NULL, /* %s: streaming */\n", mm->name);
    }
    printer_printf(p, "};\n\n");
  }
  printer_printf(
      p,
      "int %s__sluice_register(sluice_server *srv,\n"
      "    const %s_SluiceHandlers *handlers, void *user_data) {\n"
      "  if (handlers == NULL)\n"
      "    return SLUICE_ERR_INVALID_ARG;\n"
      "  return sluice_server_add_service(srv, &%s__sluice_service,\n",
      sm->lower, sm->c_name, sm->lower);
  if (sm->n_methods > 0)
    printer_printf(p, "      %s__sluice_dispatch,", sm->lower);
  else
    printer_printf(p, "      NULL,");
  printer_printf(p, " handlers, sizeof *handlers, user_data);\n"
                    "}\n\n");
}
