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

static const char *kind_words(method_kind k) {
  switch (k) {
  case KIND_CLIENT_STREAMING:
    return "client streaming";
  case KIND_SERVER_STREAMING:
    return "server streaming";
  case KIND_BIDI_STREAMING:
    return "bidirectional streaming";
  case KIND_UNARY:
    break;
  }
  return "unary";
}

static int streams_requests(method_kind k) {
  return k == KIND_CLIENT_STREAMING || k == KIND_BIDI_STREAMING;
}

static int streams_responses(method_kind k) {
  return k == KIND_SERVER_STREAMING || k == KIND_BIDI_STREAMING;
}

static void header_unary_client(printer *p, const service_model *sm,
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

/* The part of a streaming __start comment shared by every kind: handlers,
 * threads, the handle, the return value. */
static void doc_start_common(printer *p, const method_model *mm) {
  if (streams_responses(mm->kind))
    printer_printf(p, " * Each response reaches handlers->on_message as a\n"
                      " * const ProtobufCMessage *");
  else
    printer_printf(p, " * The single response reaches handlers->on_message, "
                      "before an OK\n"
                      " * on_done, as a const ProtobufCMessage *");
  printer_printf(
      p,
      " that is a const %s *\n"
      " * (cast it); the library owns it and frees it when the callback "
      "returns\n"
      " * (copy what you keep). opts may be NULL; *handlers is copied and its\n"
      " * on_done must be set. Callbacks run on the channel's loop thread;\n"
      " * on_done fires exactly once, last, never from inside this function.\n"
      " * *out receives the call handle, owned by the caller until\n"
      " * sluice_call_release() (exactly once, also after on_done; releasing\n"
      " * does not cancel). Returns 0 when on_done will fire, else\n"
      " * SLUICE_ERR_INVALID_ARG (a NULL argument) or SLUICE_ERR_NOMEM, as\n"
      " * sluice_call_start(): then nothing fires and there is no handle.\n"
      " * Thread-safe. */\n",
      mm->out_type);
}

static void header_stream_client(printer *p, const service_model *sm,
                                 const method_model *mm) {
  if (!streams_requests(mm->kind)) {
    printer_printf(
        p,
        "/* Starts a %s call (%s): sends req\n"
        " * (serialized before this returns; the caller keeps it) and "
        "half-closes,\n"
        " * as sluice_call_start_msg(). A request over the maximum size "
        "fails\n"
        " * the call through on_done with RESOURCE_EXHAUSTED.\n",
        mm->path, kind_words(mm->kind));
    doc_start_common(p, mm);
    printer_printf(p,
                   "int %s__%s__start(sluice_channel *ch, const %s *req,\n"
                   "    const sluice_call_opts *opts,\n"
                   "    const sluice_call_handlers *handlers, void "
                   "*user_data,\n"
                   "    sluice_call **out);\n\n",
                   sm->lower, mm->lower, mm->in_type);
    return;
  }
  printer_printf(p,
                 "/* Starts a %s call (%s). Send the\n"
                 " * requests with %s__%s__send(), then half-close with\n"
                 " * sluice_call_close_send(). The request headers go out "
                 "at once,\n"
                 " * each message as it is sent.\n",
                 mm->path, kind_words(mm->kind), sm->lower, mm->lower);
  doc_start_common(p, mm);
  printer_printf(p,
                 "int %s__%s__start(sluice_channel *ch,\n"
                 "    const sluice_call_opts *opts,\n"
                 "    const sluice_call_handlers *handlers, void *user_data,\n"
                 "    sluice_call **out);\n\n",
                 sm->lower, mm->lower);
  printer_printf(
      p,
      "/* Queues one request of a %s call: msg is serialized\n"
      " * before this returns (the caller keeps it). Thread-safe. Returns 0,\n"
      " * SLUICE_ERR_INVALID_ARG (call or msg NULL), SLUICE_ERR_FULL (the "
      "send\n"
      " * queue is full, nothing was queued: send again from "
      "on_send_ready),\n"
      " * SLUICE_ERR_STATE (after sluice_call_close_send() or on_done),\n"
      " * SLUICE_ERR_TOO_LARGE (the call fails with RESOURCE_EXHAUSTED) or\n"
      " * SLUICE_ERR_NOMEM, as sluice_call_send(). */\n"
      "int %s__%s__send(sluice_call *call, const %s *msg);\n\n",
      mm->path, sm->lower, mm->lower, mm->in_type);
}

static void header_handler(printer *p, const service_model *sm,
                           const method_model *mm) {
  if (mm->kind == KIND_UNARY) {
    printer_printf(
        p,
        "/* Server handler of %s. Runs on the loop thread of the call's\n"
        " * connection; req is borrowed until the call is finished. The "
        "handler\n"
        " * finishes the call exactly once, now or later from any thread, "
        "with\n"
        " * %s__%s__reply() or sluice_server_call_finish(). */\n",
        mm->path, sm->lower, mm->lower);
  } else if (mm->kind == KIND_SERVER_STREAMING) {
    printer_printf(
        p,
        "/* Server handler of %s (%s). Runs on the loop\n"
        " * thread of the call's connection once the request has arrived; req "
        "is\n"
        " * borrowed until the call is finished. Send the responses with\n"
        " * %s__%s__send_response() (sluice_server_call_set_handlers()\n"
        " * gives on_send_ready and on_done), then finish the call exactly "
        "once,\n"
        " * now or later from any thread, with sluice_server_call_finish() "
        "(OK\n"
        " * with resp NULL, or an error status). */\n",
        mm->path, kind_words(mm->kind), sm->lower, mm->lower);
  } else {
    printer_printf(
        p,
        "/* Server handler of %s (%s). Runs on the loop\n"
        " * thread of the call's connection as soon as the request headers "
        "have\n"
        " * arrived, before any message. Register callbacks with\n"
        " * sluice_server_call_set_handlers(): each request reaches "
        "on_message (on\n"
        " * that loop thread) as a const ProtobufCMessage * that is a\n"
        " * const %s * (cast it), owned by the library and freed when the\n"
        " * callback returns; on_half_close says no more will come.\n",
        mm->path, kind_words(mm->kind), mm->in_type);
    if (mm->kind == KIND_CLIENT_STREAMING)
      printer_printf(p,
                     " * Finish the call exactly once, now or later from any "
                     "thread, with\n"
                     " * %s__%s__reply() or sluice_server_call_finish(). */\n",
                     sm->lower, mm->lower);
    else
      printer_printf(p,
                     " * Send the responses with %s__%s__send_response(),\n"
                     " * then finish the call exactly once, now or later from "
                     "any thread,\n"
                     " * with sluice_server_call_finish() (OK with resp NULL, "
                     "or an error\n"
                     " * status). */\n",
                     sm->lower, mm->lower);
  }
  if (streams_requests(mm->kind))
    printer_printf(p,
                   "typedef void (*%s__%s_Handler)(sluice_server_call *call,\n"
                   "    void *user_data);\n\n",
                   sm->c_name, mm->name);
  else
    printer_printf(p,
                   "typedef void (*%s__%s_Handler)(sluice_server_call *call,\n"
                   "    const %s *req, void *user_data);\n\n",
                   sm->c_name, mm->name, mm->in_type);
}

static void header_server_helper(printer *p, const service_model *sm,
                                 const method_model *mm) {
  if (!streams_responses(mm->kind)) {
    printer_printf(
        p,
        "/* Finishes a %s call with status OK and resp (serialized\n"
        " * before this returns; the caller keeps resp). Any thread, once per\n"
        " * call. Returns 0, SLUICE_ERR_INVALID_ARG (call or resp NULL) or\n"
        " * SLUICE_ERR_STATE (already finished), as "
        "sluice_server_call_reply().\n"
        " */\n"
        "int %s__%s__reply(sluice_server_call *call, const %s *resp);\n\n",
        mm->path, sm->lower, mm->lower, mm->out_type);
    return;
  }
  printer_printf(
      p,
      "/* Queues one response of a %s call: msg is serialized\n"
      " * before this returns (the caller keeps it). Any thread, before the "
      "call\n"
      " * is finished. Returns 0, SLUICE_ERR_INVALID_ARG (call or msg NULL),\n"
      " * SLUICE_ERR_FULL (the send queue is full, nothing was queued: send "
      "again\n"
      " * from on_send_ready), SLUICE_ERR_STATE (finished or cancelled),\n"
      " * SLUICE_ERR_TOO_LARGE (nothing sent) or SLUICE_ERR_NOMEM, as\n"
      " * sluice_server_call_send(). */\n"
      "int %s__%s__send_response(sluice_server_call *call, const %s *msg);\n\n",
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
    if (mm->kind == KIND_UNARY)
      header_unary_client(p, sm, mm);
    else
      header_stream_client(p, sm, mm);
    header_handler(p, sm, mm);
    header_server_helper(p, sm, mm);
  }

  printer_printf(p,
                 "/* The server handlers of %s, one per method; a NULL\n"
                 " * member answers UNIMPLEMENTED. */\n"
                 "typedef struct %s_SluiceHandlers {\n",
                 sm->full_name, sm->c_name);
  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    printer_printf(p, "  %s__%s_Handler %s;\n", sm->c_name, mm->name,
                   mm->member);
  }
  if (sm->n_methods == 0) /* C has no empty structs */
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

static void source_unary_client(printer *p, const service_model *sm,
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
}

static void source_stream_client(printer *p, const service_model *sm,
                                 const method_model *mm, size_t index) {
  if (!streams_requests(mm->kind)) {
    /* The runtime queues the request and half-closes before the call
     * reaches the loop, so no callback can race with this function. */
    printer_printf(
        p,
        "int %s__%s__start(sluice_channel *ch, const %s *req,\n"
        "    const sluice_call_opts *opts,\n"
        "    const sluice_call_handlers *handlers, void *user_data,\n"
        "    sluice_call **out) {\n"
        "  return sluice_call_start_msg(ch, &%s__sluice_methods[%zu],\n"
        "      req ? &req->base : NULL, opts, handlers, user_data, out);\n"
        "}\n\n",
        sm->lower, mm->lower, mm->in_type, sm->lower, index);
    return;
  }
  printer_printf(
      p,
      "int %s__%s__start(sluice_channel *ch,\n"
      "    const sluice_call_opts *opts,\n"
      "    const sluice_call_handlers *handlers, void *user_data,\n"
      "    sluice_call **out) {\n"
      "  return sluice_call_start(ch, &%s__sluice_methods[%zu], opts,\n"
      "                           handlers, user_data, out);\n"
      "}\n\n",
      sm->lower, mm->lower, sm->lower, index);
  printer_printf(p,
                 "int %s__%s__send(sluice_call *call, const %s *msg) {\n"
                 "  if (msg == NULL)\n"
                 "    return SLUICE_ERR_INVALID_ARG;\n"
                 "  return sluice_call_send(call, &msg->base);\n"
                 "}\n\n",
                 sm->lower, mm->lower, mm->in_type);
}

static void source_server(printer *p, const service_model *sm,
                          const method_model *mm) {
  printer_printf(
      p,
      "static void %s__%s__sluice_dispatch(sluice_server_call *call,\n"
      "    const ProtobufCMessage *req, const void *handlers,\n"
      "    void *user_data) {\n"
      "  const %s_SluiceHandlers *h = handlers;\n",
      sm->lower, mm->lower, sm->c_name);
  if (streams_requests(mm->kind))
    printer_printf(p, "  (void)req; /* NULL: requests come through "
                      "sluice_server_call_set_handlers() */\n");
  printer_printf(
      p,
      "  if (h == NULL || h->%s == NULL) {\n"
      "    (void)sluice_server_call_finish(call, SLUICE_STATUS_UNIMPLEMENTED,\n"
      "                                    \"method not implemented\", NULL);\n"
      "    return;\n"
      "  }\n",
      mm->member);
  if (streams_requests(mm->kind))
    printer_printf(p, "  h->%s(call, user_data);\n}\n\n", mm->member);
  else
    printer_printf(p, "  h->%s(call, (const %s *)req, user_data);\n}\n\n",
                   mm->member, mm->in_type);

  if (!streams_responses(mm->kind))
    printer_printf(p,
                   "int %s__%s__reply(sluice_server_call *call, const %s "
                   "*resp) {\n"
                   "  return sluice_server_call_reply(call, resp ? "
                   "&resp->base : NULL);\n"
                   "}\n\n",
                   sm->lower, mm->lower, mm->out_type);
  else
    printer_printf(p,
                   "int %s__%s__send_response(sluice_server_call *call,\n"
                   "    const %s *msg) {\n"
                   "  if (msg == NULL)\n"
                   "    return SLUICE_ERR_INVALID_ARG;\n"
                   "  return sluice_server_call_send(call, &msg->base);\n"
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

  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    if (mm->kind == KIND_UNARY)
      source_unary_client(p, sm, mm, i);
    else
      source_stream_client(p, sm, mm, i);
    source_server(p, sm, mm);
  }

  if (sm->n_methods > 0) {
    /* One entry per method: a NULL handler member answers UNIMPLEMENTED
     * inside the dispatch function. */
    printer_printf(p,
                   "static const sluice_unary_dispatch "
                   "%s__sluice_dispatch[%zu] = {\n",
                   sm->lower, sm->n_methods);
    for (size_t i = 0; i < sm->n_methods; i++)
      printer_printf(p, "    %s__%s__sluice_dispatch,\n", sm->lower,
                     sm->methods[i].lower);
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
