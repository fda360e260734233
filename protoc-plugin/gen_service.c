/* protoc-gen-sluice: per-service code generation (see gen_service.h).
 *
 * Every identifier comes from the model's template variables ($start$,
 * $Handlers$ ...; see model.c), so what is printed here is exactly what the
 * collision check saw. Doc comments are paragraphs that the printer
 * re-flows; lists go through printer_list, which puts one item per line when
 * they do not fit in 80 columns.
 *
 * Streaming methods are typed both ways: the user's typed callbacks travel
 * through the runtime as sluice_generic_fn (sluice_call_start_typed(),
 * sluice_server_call_set_handlers_typed()), and generated trampolines of
 * the generic handler types cast each one back to its own type before
 * calling it, so no function is ever called through a pointer of the wrong
 * type and user code needs no casts. */
#include "gen_service.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

/* A NULL-terminated list of templates, for printer_list. */
#define ITEMS(...) ((const char *const[]){__VA_ARGS__, NULL})

static int streams_requests(const method_model *mm) {
  return sluice_call_kind_streams_requests(mm->kind);
}

static int streams_responses(const method_model *mm) {
  return sluice_call_kind_streams_responses(mm->kind);
}

/* ---- header */

static void header_unary_client(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  printer_comment(
      p, v, 0,
      "Completion of $path$. Runs exactly once, on the channel's loop thread. "
      "st is borrowed until the callback returns. resp is the response when "
      "st->code is OK, else NULL; the library owns it and frees it after the "
      "callback returns (copy what you keep).");
  printer_list(
      p, v, "typedef void (*$Cb$)(",
      ITEMS("const sluice_status *st", "const $Out$ *resp", "void *user_data"),
      ");\n\n");
  printer_comment(
      p, v, 0,
      "Starts a $path$ call. req is serialized before this returns (the "
      "caller keeps it); opts may be NULL. cb fires exactly once, never from "
      "inside this function. Returns 0 when cb will fire, else "
      "SLUICE_ERR_INVALID_ARG (a NULL argument) or SLUICE_ERR_NOMEM, as "
      "sluice_unary_call(). Thread-safe.");
  printer_list(p, v, "int $async$(",
               ITEMS("sluice_channel *ch", "const $In$ *req",
                     "const sluice_call_opts *opts", "$Cb$ cb",
                     "void *user_data"),
               ");\n\n");
  printer_comment(
      p, v, 0,
      "Calls $path$ and waits on the caller's thread (never call it on a "
      "loop thread). On return *status holds the outcome (the caller owns "
      "it: sluice_status_clear(); status may be NULL) and, when the code is "
      "OK, *resp the response, owned by the caller: free it with "
      "protobuf_c_message_free_unpacked(&(*resp)->base, NULL). Returns the "
      "status code, as sluice_unary_call_blocking().");
  printer_list(p, v, "sluice_status_code $blocking$(",
               ITEMS("sluice_channel *ch", "const $In$ *req", "$Out$ **resp",
                     "const sluice_call_opts *opts", "sluice_status *status"),
               ");\n\n");
}

/* The typed client callbacks: sluice_call_handlers, member for member. */
static void header_client_handlers(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  printer_comment(
      p, v, 0,
      "What a $path$ call ($kind$) reports: the callbacks of $start$(), "
      "those of sluice_call_handlers with the response typed. Every member "
      "may be NULL except on_done. They run on the channel's loop thread, "
      "one at a time, never from inside the start function; each gets the "
      "call's handle and the user_data given with them.");
  printer_print(p, v, "typedef struct $Handlers$ {\n");
  printer_comment(p, v, 2,
                  "The response headers arrived; md (borrowed for the "
                  "callback; NULL when the server sent no custom metadata) "
                  "also stays readable afterwards in the final status. Not "
                  "called for a Trailers-Only answer.");
  printer_list(p, v, "  void (*on_initial_metadata)(",
               ITEMS("sluice_call *call", "const sluice_metadata *md",
                     "void *user_data"),
               ");\n");
  printer_comment(p, v, 2,
                  streams_responses(mm)
                      ? "One response message. msg is owned by the library "
                        "and freed when the callback returns (copy what you "
                        "keep)."
                      : "The single response message, before an OK on_done. "
                        "msg is owned by the library and freed when the "
                        "callback returns (copy what you keep).");
  printer_list(
      p, v, "  void (*on_message)(",
      ITEMS("sluice_call *call", "const $Out$ *msg", "void *user_data"),
      ");\n");
  printer_comment(p, v, 2,
                  streams_requests(mm)
                      ? "$send$() returned SLUICE_ERR_FULL earlier and the "
                        "queue has drained below half of send_buffer: send "
                        "again."
                      : "Never called: $start$() queues the one request.");
  printer_list(p, v, "  void (*on_send_ready)(",
               ITEMS("sluice_call *call", "void *user_data"), ");\n");
  printer_comment(p, v, 2,
                  "Exactly once, last; required. st is borrowed until the "
                  "callback returns. The handle stays valid until released "
                  "(sluice_call_release() may be called from here).");
  printer_list(
      p, v, "  void (*on_done)(",
      ITEMS("sluice_call *call", "const sluice_status *st", "void *user_data"),
      ");\n");
  printer_print(p, v, "} $Handlers$;\n\n");
}

/* What every streaming __start says after its kind's own part. */
#define START_COMMON                                                           \
  " opts may be NULL; *handlers is copied and its on_done must be set. *out "  \
  "receives the call handle, owned by the caller until sluice_call_release() " \
  "(exactly once, also after on_done; releasing does not cancel). Returns 0 "  \
  "when on_done will fire, else SLUICE_ERR_INVALID_ARG (a NULL argument) or "  \
  "SLUICE_ERR_NOMEM, as sluice_call_start_typed(): then nothing fires and "    \
  "there is no handle. Thread-safe."

static void header_stream_client(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  header_client_handlers(p, mm);
  if (!streams_requests(mm)) {
    printer_comment(p, v, 0,
                    "Starts a $path$ call ($kind$): sends req (serialized "
                    "before this returns; the caller keeps it) and "
                    "half-closes, as sluice_call_start_msg(). A request over "
                    "the maximum size fails the call through on_done with "
                    "RESOURCE_EXHAUSTED. Each response reaches "
                    "handlers->on_message." START_COMMON);
    printer_list(p, v, "int $start$(",
                 ITEMS("sluice_channel *ch", "const $In$ *req",
                       "const sluice_call_opts *opts",
                       "const $Handlers$ *handlers", "void *user_data",
                       "sluice_call **out"),
                 ");\n\n");
    return;
  }
  printer_comment(p, v, 0,
                  "Starts a $path$ call ($kind$). Send the requests with "
                  "$send$(), then half-close with sluice_call_close_send(). "
                  "The request headers go out at once, each message as it is "
                  "sent." START_COMMON);
  printer_list(p, v, "int $start$(",
               ITEMS("sluice_channel *ch", "const sluice_call_opts *opts",
                     "const $Handlers$ *handlers", "void *user_data",
                     "sluice_call **out"),
               ");\n\n");
  printer_comment(
      p, v, 0,
      "Queues one request of a $path$ call: msg is serialized before this "
      "returns (the caller keeps it). Thread-safe. Returns 0, "
      "SLUICE_ERR_INVALID_ARG (call or msg NULL), SLUICE_ERR_FULL (the send "
      "queue is full, nothing was queued: send again from on_send_ready), "
      "SLUICE_ERR_STATE (after sluice_call_close_send() or on_done), "
      "SLUICE_ERR_TOO_LARGE (the call fails with RESOURCE_EXHAUSTED) or "
      "SLUICE_ERR_NOMEM, as sluice_call_send().");
  printer_list(p, v, "int $send$(",
               ITEMS("sluice_call *call", "const $In$ *msg"), ");\n\n");
}

static void header_handler(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  switch (mm->kind) {
  case SLUICE_CALL_UNARY:
    printer_comment(p, v, 0,
                    "Server handler of $path$. Runs on the loop thread of the "
                    "call's connection; req is borrowed until the call is "
                    "finished. The handler finishes the call exactly once, "
                    "now or later from any thread, with $reply$() or "
                    "sluice_server_call_finish().");
    break;
  case SLUICE_CALL_SERVER_STREAMING:
    printer_comment(p, v, 0,
                    "Server handler of $path$ ($kind$). Runs on the loop "
                    "thread of the call's connection once the request has "
                    "arrived; req is borrowed until the call is finished. "
                    "Send the responses with $send_response$() "
                    "($set_handlers$() gives on_send_ready and on_done), then "
                    "finish the call exactly once, now or later from any "
                    "thread, with sluice_server_call_finish() (OK with resp "
                    "NULL, or an error status).");
    break;
  case SLUICE_CALL_CLIENT_STREAMING:
    printer_comment(p, v, 0,
                    "Server handler of $path$ ($kind$). Runs on the loop "
                    "thread of the call's connection as soon as the request "
                    "headers have arrived, before any message. Register the "
                    "callbacks with $set_handlers$(): each request reaches "
                    "on_message, on_half_close says no more will come. "
                    "Finish the call exactly once, now or later from any "
                    "thread, with $reply$() or sluice_server_call_finish().");
    break;
  case SLUICE_CALL_BIDI_STREAMING:
    printer_comment(p, v, 0,
                    "Server handler of $path$ ($kind$). Runs on the loop "
                    "thread of the call's connection as soon as the request "
                    "headers have arrived, before any message. Register the "
                    "callbacks with $set_handlers$(): each request reaches "
                    "on_message, on_half_close says no more will come. Send "
                    "the responses with $send_response$(), then finish the "
                    "call exactly once, now or later from any thread, with "
                    "sluice_server_call_finish() (OK with resp NULL, or an "
                    "error status).");
    break;
  }
  if (streams_requests(mm))
    printer_list(p, v, "typedef void (*$Handler$)(",
                 ITEMS("sluice_server_call *call", "void *user_data"),
                 ");\n\n");
  else
    printer_list(
        p, v, "typedef void (*$Handler$)(",
        ITEMS("sluice_server_call *call", "const $In$ *req", "void *user_data"),
        ");\n\n");
}

/* The typed server callbacks: sluice_server_call_handlers, member for
 * member, and the function that registers them. */
static void header_server_handlers(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  printer_comment(
      p, v, 0,
      "What a $path$ call ($kind$) reports to its server handler: the "
      "callbacks of $set_handlers$(), those of sluice_server_call_handlers "
      "with the request typed. Every member may be NULL. They run on the "
      "call's loop thread, one at a time; each gets the call and the "
      "user_data given with them.");
  printer_print(p, v, "typedef struct $ServerHandlers$ {\n");
  printer_comment(p, v, 2,
                  streams_requests(mm)
                      ? "One request message. msg is owned by the library "
                        "and freed when the callback returns (copy what you "
                        "keep)."
                      : "Never called: the one request is the handler's "
                        "req.");
  printer_list(
      p, v, "  void (*on_message)(",
      ITEMS("sluice_server_call *call", "const $In$ *msg", "void *user_data"),
      ");\n");
  printer_comment(p, v, 2,
                  streams_requests(mm)
                      ? "The client half-closed: no more messages will come."
                      : "Never called: the request was complete before the "
                        "handler ran.");
  printer_list(p, v, "  void (*on_half_close)(",
               ITEMS("sluice_server_call *call", "void *user_data"), ");\n");
  printer_comment(p, v, 2,
                  streams_responses(mm)
                      ? "$send_response$() returned SLUICE_ERR_FULL earlier "
                        "and the send queue has drained below half of its "
                        "bound: send again."
                      : "Never called: the one response goes with $reply$().");
  printer_list(p, v, "  void (*on_send_ready)(",
               ITEMS("sluice_server_call *call", "void *user_data"), ");\n");
  printer_comment(
      p, v, 2,
      "Exactly once, last: the stream is over. cancelled is 0 only when the "
      "handler's finish decided the status and it was sent; 1 when the call "
      "ended any other way (deadline, the client cancelled or reset it, the "
      "connection died, the server shut down, the library failed the "
      "request). The handle stays valid until this returns; finish must "
      "still be called once if it was not.");
  printer_list(
      p, v, "  void (*on_done)(",
      ITEMS("sluice_server_call *call", "int cancelled", "void *user_data"),
      ");\n");
  printer_print(p, v, "} $ServerHandlers$;\n\n");

  printer_comment(
      p, v, 0,
      streams_requests(mm)
          ? "Registers the callbacks of a $path$ call, as "
            "sluice_server_call_set_handlers(): *handlers is copied; "
            "user_data is passed to every callback. Requests received before "
            "this are held and delivered after it. Once per call, from any "
            "thread, before finish. Returns 0, SLUICE_ERR_INVALID_ARG (call "
            "or handlers NULL) or SLUICE_ERR_STATE (already set, or the call "
            "was finished), as sluice_server_call_set_handlers_typed()."
          : "Registers the callbacks of a $path$ call, as "
            "sluice_server_call_set_handlers(): *handlers is copied; "
            "user_data is passed to every callback. Once per call, from any "
            "thread, before finish. Returns 0, SLUICE_ERR_INVALID_ARG (call "
            "or handlers NULL) or SLUICE_ERR_STATE (already set, or the call "
            "was finished), as sluice_server_call_set_handlers_typed().");
  printer_list(p, v, "int $set_handlers$(",
               ITEMS("sluice_server_call *call",
                     "const $ServerHandlers$ *handlers", "void *user_data"),
               ");\n\n");
}

static void header_server_helper(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  if (!streams_responses(mm)) {
    printer_comment(p, v, 0,
                    "Finishes a $path$ call with status OK and resp "
                    "(serialized before this returns; the caller keeps "
                    "resp). Any thread, once per call. Returns 0, "
                    "SLUICE_ERR_INVALID_ARG (call or resp NULL) or "
                    "SLUICE_ERR_STATE (already finished), as "
                    "sluice_server_call_reply().");
    printer_list(p, v, "int $reply$(",
                 ITEMS("sluice_server_call *call", "const $Out$ *resp"),
                 ");\n\n");
    return;
  }
  printer_comment(
      p, v, 0,
      "Queues one response of a $path$ call: msg is serialized before this "
      "returns (the caller keeps it). Any thread, before the call is "
      "finished. Returns 0, SLUICE_ERR_INVALID_ARG (call or msg NULL), "
      "SLUICE_ERR_FULL (the send queue is full, nothing was queued: send "
      "again from on_send_ready), SLUICE_ERR_STATE (finished or cancelled), "
      "SLUICE_ERR_TOO_LARGE (nothing sent) or SLUICE_ERR_NOMEM, as "
      "sluice_server_call_send().");
  printer_list(p, v, "int $send_response$(",
               ITEMS("sluice_server_call *call", "const $Out$ *msg"), ");\n\n");
}

void gen_service_header(printer *p, const service_model *sm, size_t n_files) {
  const printer_var *v = sm->vars.v;
  printer_print(p, v, "/* ---- service $full$ */\n\n");
  char buf[256];
  if (sm->n_methods > 0) {
    printer_comment(p, v, 0,
                    "The methods of $full$ in .proto order, with their "
                    "(sluice.method) defaults; static, for the whole "
                    "program.");
    printer_print(p, v,
                  "extern const sluice_method_desc $svc_methods$[$n$];\n");
  }
  printer_comment(p, v, 0,
                  "The service table of $full$, as the runtime reads it.");
  printer_print(p, v, "extern const sluice_service_desc $svc_service$;\n\n");
  printer_comment(p, v, 0,
                  "The serialized FileDescriptorProtos of $full$'s file and "
                  "of everything it imports, for server reflection; "
                  "$svc_register$() gives them to "
                  "sluice_server_add_descriptors().");
  snprintf(buf, sizeof buf,
           "extern const sluice_file_descriptor $svc_files$[%zu];\n\n",
           n_files);
  printer_print(p, v, buf);

  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    if (mm->kind == SLUICE_CALL_UNARY)
      header_unary_client(p, mm);
    else
      header_stream_client(p, mm);
    header_handler(p, mm);
    if (mm->kind != SLUICE_CALL_UNARY)
      header_server_handlers(p, mm);
    header_server_helper(p, mm);
  }

  printer_comment(p, v, 0,
                  "The server handlers of $full$, one per method; a NULL "
                  "member answers UNIMPLEMENTED.");
  printer_print(p, v, "typedef struct $SvcHandlers$ {\n");
  for (size_t i = 0; i < sm->n_methods; i++)
    printer_print(p, sm->methods[i].vars.v, "  $Handler$ $member$;\n");
  if (sm->n_methods == 0) /* C has no empty structs */
    printer_print(p, v, "  char sluice_unused_;\n");
  printer_print(p, v, "} $SvcHandlers$;\n\n");

  printer_comment(p, v, 0,
                  "Registers $full$ on srv, before sluice_server_start(). "
                  "*handlers is copied; user_data is passed to every handler. "
                  "Returns 0, SLUICE_ERR_INVALID_ARG (srv or handlers NULL), "
                  "SLUICE_ERR_DUPLICATE, SLUICE_ERR_STATE or "
                  "SLUICE_ERR_NOMEM, as sluice_server_add_service().");
  printer_list(p, v, "int $svc_register$(",
               ITEMS("sluice_server *srv", "const $SvcHandlers$ *handlers",
                     "void *user_data"),
               ");\n\n");
}

/* ---- source */

static void source_unary_client(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  /* The runtime calls back through one generic signature; the trampoline
   * turns it back into the user's typed callback. */
  printer_list(p, v, "static void $tramp$(",
               ITEMS("const sluice_status *st", "const ProtobufCMessage *resp",
                     "sluice_generic_fn cb", "void *user_data"),
               ") {\n");
  printer_list(p, v, "  (($Cb$)cb)(",
               ITEMS("st", "(const $Out$ *)resp", "user_data"), ");\n");
  printer_print(p, v, "}\n\n");

  printer_list(p, v, "int $async$(",
               ITEMS("sluice_channel *ch", "const $In$ *req",
                     "const sluice_call_opts *opts", "$Cb$ cb",
                     "void *user_data"),
               ") {\n");
  printer_print(p, v,
                "  /* NULL goes through: the runtime reports it as "
                "INVALID_ARG. */\n");
  printer_list(p, v, "  return sluice_unary_call_tramp(",
               ITEMS("ch", "&$svc_methods$[$i$]", "req ? &req->base : NULL",
                     "opts", "$tramp$", "(sluice_generic_fn)cb", "user_data"),
               ");\n");
  printer_print(p, v, "}\n\n");

  printer_list(p, v, "sluice_status_code $blocking$(",
               ITEMS("sluice_channel *ch", "const $In$ *req", "$Out$ **resp",
                     "const sluice_call_opts *opts", "sluice_status *status"),
               ") {\n");
  printer_print(p, v, "  ProtobufCMessage *msg = NULL;\n");
  printer_list(p, v, "  sluice_status_code code = sluice_unary_call_blocking(",
               ITEMS("ch", "&$svc_methods$[$i$]", "req ? &req->base : NULL",
                     "resp ? &msg : NULL", "opts", "status"),
               ");\n");
  printer_print(p, v,
                "  if (resp)\n"
                "    *resp = ($Out$ *)msg;\n"
                "  return code;\n"
                "}\n\n");
}

/* The trampolines every streaming method of a service shares: the
 * callbacks whose arguments do not depend on the method. */
static void source_shared_trampolines(printer *p, const service_model *sm) {
  const printer_var *v = sm->vars.v;
  printer_comment(
      p, v, 0,
      "Trampolines of the typed streaming callbacks. The runtime calls them "
      "through the generic handler types, with its copy of the typed "
      "handlers as user_data (sluice_call_start_typed(), "
      "sluice_server_call_set_handlers_typed()); each casts its member back "
      "to the type it was cast from and calls it with the user's user_data.");
  printer_list(p, v, "static void $svc_on_initial_metadata$(",
               ITEMS("sluice_call *call", "const sluice_metadata *md",
                     "void *user_data"),
               ") {\n");
  printer_print(p, v,
                "  typedef void (*typed_fn)(sluice_call *, const "
                "sluice_metadata *, void *);\n"
                "  const sluice_call_typed_handlers *t = user_data;\n"
                "  if (t->on_initial_metadata)\n"
                "    ((typed_fn)t->on_initial_metadata)(call, md, "
                "t->user_data);\n"
                "}\n\n");
  printer_list(p, v, "static void $svc_on_send_ready$(",
               ITEMS("sluice_call *call", "void *user_data"), ") {\n");
  printer_print(p, v,
                "  typedef void (*typed_fn)(sluice_call *, void *);\n"
                "  const sluice_call_typed_handlers *t = user_data;\n"
                "  if (t->on_send_ready)\n"
                "    ((typed_fn)t->on_send_ready)(call, t->user_data);\n"
                "}\n\n");
  printer_list(
      p, v, "static void $svc_on_done$(",
      ITEMS("sluice_call *call", "const sluice_status *st", "void *user_data"),
      ") {\n");
  printer_print(p, v,
                "  typedef void (*typed_fn)(sluice_call *, const "
                "sluice_status *, void *);\n"
                "  const sluice_call_typed_handlers *t = user_data;\n"
                "  /* Never NULL: sluice_call_start_typed() refuses that. */\n"
                "  ((typed_fn)t->on_done)(call, st, t->user_data);\n"
                "}\n\n");
  printer_list(p, v, "static void $svc_server_on_half_close$(",
               ITEMS("sluice_server_call *call", "void *user_data"), ") {\n");
  printer_print(p, v,
                "  typedef void (*typed_fn)(sluice_server_call *, void *);\n"
                "  const sluice_server_call_typed_handlers *t = user_data;\n"
                "  if (t->on_half_close)\n"
                "    ((typed_fn)t->on_half_close)(call, t->user_data);\n"
                "}\n\n");
  printer_list(p, v, "static void $svc_server_on_send_ready$(",
               ITEMS("sluice_server_call *call", "void *user_data"), ") {\n");
  printer_print(p, v,
                "  typedef void (*typed_fn)(sluice_server_call *, void *);\n"
                "  const sluice_server_call_typed_handlers *t = user_data;\n"
                "  if (t->on_send_ready)\n"
                "    ((typed_fn)t->on_send_ready)(call, t->user_data);\n"
                "}\n\n");
  printer_list(
      p, v, "static void $svc_server_on_done$(",
      ITEMS("sluice_server_call *call", "int cancelled", "void *user_data"),
      ") {\n");
  printer_print(p, v,
                "  typedef void (*typed_fn)(sluice_server_call *, int, void "
                "*);\n"
                "  const sluice_server_call_typed_handlers *t = user_data;\n"
                "  if (t->on_done)\n"
                "    ((typed_fn)t->on_done)(call, cancelled, t->user_data);\n"
                "}\n\n");
}

static void source_stream_client(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  printer_list(p, v, "static void $on_message$(",
               ITEMS("sluice_call *call", "const ProtobufCMessage *msg",
                     "void *user_data"),
               ") {\n");
  printer_list(p, v, "  typedef void (*typed_fn)(",
               ITEMS("sluice_call *", "const $Out$ *", "void *"), ");\n");
  printer_print(p, v,
                "  const sluice_call_typed_handlers *t = user_data;\n"
                "  if (t->on_message)\n");
  printer_list(p, v, "    ((typed_fn)t->on_message)(",
               ITEMS("call", "(const $Out$ *)msg", "t->user_data"), ");\n");
  printer_print(p, v, "}\n\n");
  printer_list(p, v, "static const sluice_call_handlers\n    $tramps$ = {",
               ITEMS("$svc_on_initial_metadata$", "$on_message$",
                     "$svc_on_send_ready$", "$svc_on_done$"),
               "};\n\n");

  if (!streams_requests(mm)) {
    /* The runtime queues the request and half-closes before the call
     * reaches the loop, so no callback can race with this function. */
    printer_list(p, v, "int $start$(",
                 ITEMS("sluice_channel *ch", "const $In$ *req",
                       "const sluice_call_opts *opts",
                       "const $Handlers$ *handlers", "void *user_data",
                       "sluice_call **out"),
                 ") {\n");
    /* req NULL would start a call without its request. */
    printer_print(p, v,
                  "  if (req == NULL || handlers == NULL)\n"
                  "    return SLUICE_ERR_INVALID_ARG;\n");
  } else {
    printer_list(p, v, "int $start$(",
                 ITEMS("sluice_channel *ch", "const sluice_call_opts *opts",
                       "const $Handlers$ *handlers", "void *user_data",
                       "sluice_call **out"),
                 ") {\n");
    printer_print(p, v,
                  "  if (handlers == NULL)\n"
                  "    return SLUICE_ERR_INVALID_ARG;\n");
  }
  printer_list(p, v, "  const sluice_call_typed_handlers typed = {",
               ITEMS("(sluice_generic_fn)handlers->on_initial_metadata",
                     "(sluice_generic_fn)handlers->on_message",
                     "(sluice_generic_fn)handlers->on_send_ready",
                     "(sluice_generic_fn)handlers->on_done", "user_data"),
               "};\n");
  printer_list(p, v, "  return sluice_call_start_typed(",
               ITEMS("ch", "&$svc_methods$[$i$]",
                     streams_requests(mm) ? "NULL" : "&req->base", "opts",
                     "&$tramps$", "&typed", "out"),
               ");\n");
  printer_print(p, v, "}\n\n");

  if (streams_requests(mm)) {
    printer_list(p, v, "int $send$(",
                 ITEMS("sluice_call *call", "const $In$ *msg"), ") {\n");
    printer_print(p, v,
                  "  if (msg == NULL)\n"
                  "    return SLUICE_ERR_INVALID_ARG;\n"
                  "  return sluice_call_send(call, &msg->base);\n"
                  "}\n\n");
  }
}

static void source_server(printer *p, const method_model *mm) {
  const printer_var *v = mm->vars.v;
  printer_list(p, v, "static void $dispatch$(",
               ITEMS("sluice_server_call *call", "const ProtobufCMessage *req",
                     "const void *handlers", "void *user_data"),
               ") {\n");
  printer_print(p, v, "  const $SvcHandlers$ *h = handlers;\n");
  if (streams_requests(mm)) {
    printer_comment(p, v, 2,
                    "req is NULL: the requests come through $set_handlers$().");
    printer_print(p, v, "  (void)req;\n");
  }
  printer_print(p, v,
                "  if (h == NULL || h->$member$ == NULL) {\n"
                "    (void)sluice_server_call_finish(call, "
                "SLUICE_STATUS_UNIMPLEMENTED,\n"
                "                                    \"method not "
                "implemented\", NULL);\n"
                "    return;\n"
                "  }\n");
  if (streams_requests(mm))
    printer_print(p, v, "  h->$member$(call, user_data);\n}\n\n");
  else
    printer_list(p, v, "  h->$member$(",
                 ITEMS("call", "(const $In$ *)req", "user_data"), ");\n}\n\n");

  if (mm->kind != SLUICE_CALL_UNARY) {
    printer_list(p, v, "static void $server_on_message$(",
                 ITEMS("sluice_server_call *call",
                       "const ProtobufCMessage *msg", "void *user_data"),
                 ") {\n");
    printer_list(p, v, "  typedef void (*typed_fn)(",
                 ITEMS("sluice_server_call *", "const $In$ *", "void *"),
                 ");\n");
    printer_print(p, v,
                  "  const sluice_server_call_typed_handlers *t = "
                  "user_data;\n"
                  "  if (t->on_message)\n");
    printer_list(p, v, "    ((typed_fn)t->on_message)(",
                 ITEMS("call", "(const $In$ *)msg", "t->user_data"), ");\n");
    printer_print(p, v, "}\n\n");
    printer_list(p, v,
                 "static const sluice_server_call_handlers\n"
                 "    $server_tramps$ = {",
                 ITEMS("$server_on_message$", "$svc_server_on_half_close$",
                       "$svc_server_on_send_ready$", "$svc_server_on_done$"),
                 "};\n\n");
    printer_list(p, v, "int $set_handlers$(",
                 ITEMS("sluice_server_call *call",
                       "const $ServerHandlers$ *handlers", "void *user_data"),
                 ") {\n");
    printer_print(p, v,
                  "  if (handlers == NULL)\n"
                  "    return SLUICE_ERR_INVALID_ARG;\n");
    printer_list(p, v, "  const sluice_server_call_typed_handlers typed = {",
                 ITEMS("(sluice_generic_fn)handlers->on_message",
                       "(sluice_generic_fn)handlers->on_half_close",
                       "(sluice_generic_fn)handlers->on_send_ready",
                       "(sluice_generic_fn)handlers->on_done", "user_data"),
                 "};\n");
    printer_list(p, v, "  return sluice_server_call_set_handlers_typed(",
                 ITEMS("call", "&$server_tramps$", "&typed"), ");\n");
    printer_print(p, v, "}\n\n");
  }

  if (!streams_responses(mm)) {
    printer_list(p, v, "int $reply$(",
                 ITEMS("sluice_server_call *call", "const $Out$ *resp"),
                 ") {\n");
    printer_list(p, v, "  return sluice_server_call_reply(",
                 ITEMS("call", "resp ? &resp->base : NULL"), ");\n");
    printer_print(p, v, "}\n\n");
  } else {
    printer_list(p, v, "int $send_response$(",
                 ITEMS("sluice_server_call *call", "const $Out$ *msg"),
                 ") {\n");
    printer_print(p, v,
                  "  if (msg == NULL)\n"
                  "    return SLUICE_ERR_INVALID_ARG;\n"
                  "  return sluice_server_call_send(call, &msg->base);\n"
                  "}\n\n");
  }
}

/* x as a C double constant that reads back as x: the shortest "%.*g"
 * that does, with ".0" added when that looks like an integer. */
static void double_literal(char *buf, size_t size, double x) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, x);
    if (strtod(buf, NULL) == x)
      break;
  }
  if (strpbrk(buf, ".e") == NULL && strlen(buf) + 3 <= size)
    strcat(buf, ".0");
}

/* field ("    .retry.retryable_codes = "), then the codes of bits ORed,
 * one per line below it; "0" when there are none. */
static void print_codes(printer *p, const char *field, uint32_t bits) {
  printer_print(p, NULL, field);
  if (bits == 0) {
    printer_print(p, NULL, " 0,\n");
    return;
  }
  const char *sep = "\n";
  for (unsigned c = 0; c < 32; c++) {
    if (!(bits & SLUICE_CODE_BIT(c)) || options_code_name(c) == NULL)
      continue;
    const printer_var v[] = {{"code", options_code_name(c)}, {NULL, NULL}};
    printer_print(p, NULL, sep);
    printer_print(p, v, "        SLUICE_CODE_BIT(SLUICE_STATUS_$code$)");
    sep = " |\n";
  }
  printer_print(p, NULL, ",\n");
}

/* The method's (sluice.method) options as a sluice_method_config, for a
 * method that declares a retry or a hedging policy; its desc's config
 * points at it. */
static void source_method_config(printer *p, const method_model *mm) {
  const sluice_method_config *mc = &mm->defaults.config;
  char timeout[24], req[16], resp[16], attempts[16], initial[16], max[16],
      mult[40], delay[16];
  snprintf(timeout, sizeof timeout, "%llu", (unsigned long long)mc->timeout_ms);
  snprintf(req, sizeof req, "%lu", (unsigned long)mc->max_request_bytes);
  snprintf(resp, sizeof resp, "%lu", (unsigned long)mc->max_response_bytes);
  snprintf(attempts, sizeof attempts, "%lu",
           (unsigned long)(mc->has_retry ? mc->retry.max_attempts
                                         : mc->hedging.max_attempts));
  snprintf(initial, sizeof initial, "%lu",
           (unsigned long)mc->retry.initial_backoff_ms);
  snprintf(max, sizeof max, "%lu", (unsigned long)mc->retry.max_backoff_ms);
  double_literal(mult, sizeof mult, mc->retry.backoff_multiplier);
  snprintf(delay, sizeof delay, "%lu",
           (unsigned long)mc->hedging.hedging_delay_ms);
  const printer_var vars[] = {
      {"timeout", timeout},   {"req", req},         {"resp", resp},
      {"attempts", attempts}, {"initial", initial}, {"max", max},
      {"mult", mult},         {"delay", delay},     {NULL, NULL}};
  printer_comment(p, mm->vars.v, 0,
                  mc->has_retry
                      ? "(sluice.method) of $path$: its retry policy and its "
                        "other options. A channel's service config and a "
                        "call's own options take precedence."
                      : "(sluice.method) of $path$: its hedging policy and "
                        "its other options. A channel's service config and a "
                        "call's own options take precedence.");
  /* Broken after the type when the line would not fit, as the dispatch
   * table is. */
  const char *name = "";
  for (size_t i = 0; i < mm->vars.n; i++)
    if (strcmp(mm->vars.v[i].name, "config_var") == 0)
      name = mm->vars.v[i].value;
  printer_print(p, mm->vars.v,
                strlen("static const sluice_method_config  = {") +
                            strlen(name) <=
                        PRINTER_WIDTH
                    ? "static const sluice_method_config $config_var$ = {\n"
                    : "static const sluice_method_config\n"
                      "    $config_var$ = {\n");
  printer_print(p, vars,
                "    .timeout_ms = UINT64_C($timeout$),\n"
                "    .wait_for_ready = -1,\n"
                "    .max_request_bytes = UINT32_C($req$),\n"
                "    .max_response_bytes = UINT32_C($resp$),\n");
  if (mc->has_retry) {
    printer_print(p, vars,
                  "    .has_retry = 1,\n"
                  "    .retry.max_attempts = $attempts$,\n"
                  "    .retry.initial_backoff_ms = $initial$,\n"
                  "    .retry.max_backoff_ms = $max$,\n"
                  "    .retry.backoff_multiplier = $mult$,\n");
    print_codes(p, "    .retry.retryable_codes =", mc->retry.retryable_codes);
  } else {
    printer_print(p, vars,
                  "    .has_hedging = 1,\n"
                  "    .hedging.max_attempts = $attempts$,\n"
                  "    .hedging.hedging_delay_ms = $delay$,\n");
    print_codes(p,
                "    .hedging.non_fatal_codes =", mc->hedging.non_fatal_codes);
  }
  printer_print(p, vars, "};\n\n");
}

void gen_service_source(printer *p, const service_model *sm, size_t n_files) {
  const printer_var *v = sm->vars.v;
  printer_print(p, v, "/* ---- service $full$ */\n\n");
  char buf[256];
  snprintf(buf, sizeof buf,
           "const sluice_file_descriptor $svc_files$[%zu] = {\n", n_files);
  printer_print(p, v, buf);
  for (size_t i = 0; i < n_files; i++) {
    snprintf(buf, sizeof buf, "    {sluice_fd_%zu_, sizeof sluice_fd_%zu_},\n",
             i, i);
    printer_print(p, v, buf);
  }
  printer_print(p, v, "};\n\n");
  for (size_t i = 0; i < sm->n_methods; i++)
    if (sm->methods[i].defaults.has_config)
      source_method_config(p, &sm->methods[i]);
  if (sm->n_methods > 0) {
    printer_print(p, v, "const sluice_method_desc $svc_methods$[$n$] = {\n");
    for (size_t i = 0; i < sm->n_methods; i++)
      printer_print(p, sm->methods[i].vars.v,
                    "    {\"$path$\", \"$M$\",\n"
                    "     &$in_desc$,\n"
                    "     &$out_desc$,\n"
                    "     $KIND$, UINT64_C($timeout_ms$),\n"
                    "     UINT32_C($max_request$), UINT32_C($max_response$),\n"
                    "     $config$},\n");
    printer_print(p, v, "};\n\n");
    printer_list(p, v, "const sluice_service_desc $svc_service$ = {",
                 ITEMS("\"$full$\"", "$n$", "$svc_methods$"), "};\n\n");
  } else {
    printer_list(p, v, "const sluice_service_desc $svc_service$ = {",
                 ITEMS("\"$full$\"", "0", "NULL"), "};\n\n");
  }
  if (sm->any_streaming)
    source_shared_trampolines(p, sm);

  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    if (mm->kind == SLUICE_CALL_UNARY)
      source_unary_client(p, mm);
    else
      source_stream_client(p, mm);
    source_server(p, mm);
  }

  if (sm->n_methods > 0) {
    /* One entry per method: a NULL handler member answers UNIMPLEMENTED
     * inside the dispatch function. */
    printer_print(p, v,
                  "static const sluice_method_dispatch\n"
                  "    $svc_dispatch$[$n$] = {\n");
    for (size_t i = 0; i < sm->n_methods; i++)
      printer_print(p, sm->methods[i].vars.v, "        $dispatch$,\n");
    printer_print(p, v, "};\n\n");
  }
  printer_list(p, v, "int $svc_register$(",
               ITEMS("sluice_server *srv", "const $SvcHandlers$ *handlers",
                     "void *user_data"),
               ") {\n");
  printer_print(p, v,
                "  if (handlers == NULL)\n"
                "    return SLUICE_ERR_INVALID_ARG;\n");
  snprintf(buf, sizeof buf,
           "  int rv = sluice_server_add_descriptors(srv, $svc_files$, %zu);\n"
           "  if (rv != 0)\n"
           "    return rv;\n",
           n_files);
  printer_print(p, v, buf);
  printer_list(p, v, "  return sluice_server_add_service(",
               ITEMS("srv", "&$svc_service$",
                     sm->n_methods > 0 ? "$svc_dispatch$" : "NULL", "handlers",
                     "sizeof *handlers", "user_data"),
               ");\n");
  printer_print(p, v, "}\n\n");
}
