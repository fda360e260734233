/* Tests of protoc-gen-sluice's output: every generated header in one
 * translation unit with protoc-c's (so any clash between them fails the
 * build), the exact names and signatures of the contract (checked by the
 * compiler through typed pointers), and the contents of the method tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "google/protobuf/descriptor.pb-c.h"

#include "deep.sluice.h"
#include "defaults.sluice.h"
#include "helloworld.sluice.h"
#include "imports/a.sluice.h"
#include "imports/b.sluice.h"
#include "keywords.sluice.h"
#include "multi.sluice.h"
#include "nested.sluice.h"
#include "nopkg.sluice.h"
#include "policies.sluice.h"
#include "streaming.sluice.h"

/* The contract of the brief, spelled out as types: a renamed function or a
 * changed parameter fails to compile here. */
static int (*const hw_async)(sluice_channel *, const Helloworld__HelloRequest *,
                             const sluice_call_opts *,
                             Helloworld__Greeter__SayHello_Cb,
                             void *) = helloworld__greeter__say_hello__async;
static sluice_status_code (*const hw_blocking)(
    sluice_channel *, const Helloworld__HelloRequest *,
    Helloworld__HelloReply **, const sluice_call_opts *,
    sluice_status *) = helloworld__greeter__say_hello__blocking;
static int (*const hw_register)(sluice_server *,
                                const Helloworld__Greeter_SluiceHandlers *,
                                void *) = helloworld__greeter__sluice_register;
static int (*const hw_reply)(sluice_server_call *,
                             const Helloworld__HelloReply *) =
    helloworld__greeter__say_hello__reply;

static void hw_cb(const sluice_status *st, const Helloworld__HelloReply *resp,
                  void *user_data) {
  (void)st;
  (void)resp;
  (void)user_data;
}

static void hw_handler(sluice_server_call *call,
                       const Helloworld__HelloRequest *req, void *user_data) {
  (void)call;
  (void)req;
  (void)user_data;
}

static void check_method(const sluice_method_desc *m, const char *path,
                         const char *name, const ProtobufCMessageDescriptor *in,
                         const ProtobufCMessageDescriptor *out,
                         sluice_call_kind kind) {
  assert_string_equal(m->path, path);
  assert_string_equal(m->name, name);
  assert_ptr_equal(m->request, in);
  assert_ptr_equal(m->response, out);
  assert_int_equal(m->kind, kind);
}

static void check_no_defaults(const sluice_method_desc *m) {
  assert_true(m->default_timeout_ms == 0);
  assert_int_equal(m->max_request_size, 0);
  assert_int_equal(m->max_response_size, 0);
  assert_null(m->config);
}

static void test_helloworld(void **state) {
  (void)state;
  const sluice_service_desc *s = &helloworld__greeter__sluice_service;
  assert_string_equal(s->full_name, "helloworld.Greeter");
  assert_int_equal(s->n_methods, 1);
  assert_ptr_equal(s->methods, helloworld__greeter__sluice_methods);
  check_method(&s->methods[0], "/helloworld.Greeter/SayHello", "SayHello",
               &helloworld__hello_request__descriptor,
               &helloworld__hello_reply__descriptor, SLUICE_CALL_UNARY);
  check_no_defaults(&s->methods[0]);

  Helloworld__Greeter_SluiceHandlers h = {.say_hello = hw_handler};
  assert_ptr_equal(h.say_hello, hw_handler);
  Helloworld__Greeter__SayHello_Cb cb = hw_cb;
  assert_non_null(cb);
  assert_non_null(hw_async);
  assert_non_null(hw_blocking);
  assert_non_null(hw_reply);
  /* The dispatch type's former name is the same type (deprecated alias). */
  sluice_unary_dispatch old_name = NULL;
  sluice_method_dispatch new_name = old_name;
  assert_null(new_name);
}

static void test_null_arguments(void **state) {
  (void)state;
  /* A NULL request goes through to the runtime, which refuses it. */
  Helloworld__HelloRequest req = HELLOWORLD__HELLO_REQUEST__INIT;
  assert_int_equal(hw_async(NULL, &req, NULL, hw_cb, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(hw_async(NULL, NULL, NULL, hw_cb, NULL),
                   SLUICE_ERR_INVALID_ARG);
  /* No handlers is caught by the generated code itself. */
  assert_int_equal(hw_register(NULL, NULL, NULL), SLUICE_ERR_INVALID_ARG);
}

static void test_no_package(void **state) {
  (void)state;
  const sluice_service_desc *s = &greeter__sluice_service;
  assert_string_equal(s->full_name, "Greeter");
  assert_int_equal(s->n_methods, 2);
  check_method(&greeter__sluice_methods[0], "/Greeter/SayHello", "SayHello",
               &plain_request__descriptor, &plain_reply__descriptor,
               SLUICE_CALL_UNARY);
  check_method(&greeter__sluice_methods[1], "/Greeter/GetHTTPStatus",
               "GetHTTPStatus", &plain_request__descriptor,
               &plain_reply__descriptor, SLUICE_CALL_UNARY);
  /* CamelToLower as protoc-c does it: "GetHTTPStatus" -> "get_httpstatus" */
  Greeter_SluiceHandlers h = {.say_hello = NULL, .get_httpstatus = NULL};
  (void)h;
  Greeter__GetHTTPStatus_Cb cb = NULL;
  (void)cb;
  assert_non_null(greeter__get_httpstatus__async);
  assert_non_null(greeter__say_hello__blocking);
}

static void test_nested(void **state) {
  (void)state;
  assert_int_equal(nested__nest__sluice_service.n_methods, 2);
  check_method(&nested__nest__sluice_methods[0], "/nested.Nest/Deep", "Deep",
               &nested__outer__inner__leaf__descriptor,
               &nested__outer__inner__descriptor, SLUICE_CALL_UNARY);
  check_method(&nested__nest__sluice_methods[1], "/nested.Nest/Shallow",
               "Shallow", &nested__outer__descriptor,
               &nested__outer__inner__leaf__descriptor, SLUICE_CALL_UNARY);
  Nested__Nest__Deep_Handler h = NULL;
  Nested__Nest_SluiceHandlers hs = {.deep = h, .shallow = NULL};
  (void)hs;
  int (*reply)(sluice_server_call *, const Nested__Outer__Inner *) =
      nested__nest__deep__reply;
  assert_non_null(reply);
}

static void test_dotted_package(void **state) {
  (void)state;
  const sluice_service_desc *s = &a__b__c_d__greeter__sluice_service;
  assert_string_equal(s->full_name, "a.b.c_d.Greeter");
  assert_int_equal(s->n_methods, 1);
  check_method(&a__b__c_d__greeter__sluice_methods[0],
               "/a.b.c_d.Greeter/SayHello", "SayHello",
               &a__b__c_d__ping__descriptor, &a__b__c_d__pong__descriptor,
               SLUICE_CALL_UNARY);
  A__B__CD__Greeter_SluiceHandlers h = {.say_hello = NULL};
  (void)h;
  A__B__CD__Greeter__SayHello_Cb cb = NULL;
  (void)cb;
  sluice_status_code (*blocking)(sluice_channel *, const A__B__CD__Ping *,
                                 A__B__CD__Pong **, const sluice_call_opts *,
                                 sluice_status *) =
      a__b__c_d__greeter__say_hello__blocking;
  assert_non_null(blocking);
}

static void test_several_services(void **state) {
  (void)state;
  assert_int_equal(multi__alpha__sluice_service.n_methods, 2);
  assert_int_equal(multi__beta__sluice_service.n_methods, 1);
  assert_int_equal(multi__gamma__sluice_service.n_methods, 0);
  assert_null(multi__gamma__sluice_service.methods);
  assert_string_equal(multi__gamma__sluice_service.full_name, "multi.Gamma");
  check_method(&multi__alpha__sluice_methods[1], "/multi.Alpha/Two", "Two",
               &multi__req__descriptor, &multi__resp__descriptor,
               SLUICE_CALL_UNARY);
  check_method(&multi__beta__sluice_methods[0], "/multi.Beta/Three", "Three",
               &multi__resp__descriptor, &multi__req__descriptor,
               SLUICE_CALL_UNARY);
  Multi__Alpha_SluiceHandlers a = {.one = NULL, .two = NULL};
  Multi__Beta_SluiceHandlers b = {.three = NULL};
  Multi__Gamma_SluiceHandlers g = {0};
  (void)b;
  /* Registering works for every service, the empty one included (its
   * generated register passes no dispatch table). */
  sluice_server *srv = NULL;
  assert_int_equal(sluice_server_new(&srv, NULL), 0);
  assert_int_equal(multi__alpha__sluice_register(srv, &a, NULL), 0);
  assert_int_equal(multi__gamma__sluice_register(srv, &g, NULL), 0);
  assert_int_equal(multi__gamma__sluice_register(srv, &g, NULL), 0);
  sluice_server_del(srv);
}

static void test_imports(void **state) {
  (void)state;
  assert_int_equal(imp__svc__importer__sluice_service.n_methods, 2);
  check_method(&imp__svc__importer__sluice_methods[0], "/imp.svc.Importer/Use",
               "Use", &imp__types__shared__descriptor,
               &imp__types__result__descriptor, SLUICE_CALL_UNARY);
  check_method(&imp__svc__importer__sluice_methods[1], "/imp.svc.Importer/Wrap",
               "Wrap", &imp__svc__local__descriptor,
               &imp__types__shared__descriptor, SLUICE_CALL_UNARY);
  int (*async)(sluice_channel *, const Imp__Types__Shared *,
               const sluice_call_opts *, Imp__Svc__Importer__Use_Cb, void *) =
      imp__svc__importer__use__async;
  assert_non_null(async);
}

static void test_keywords(void **state) {
  (void)state;
  /* protoc-c escapes fields; we escape handler members. */
  Kw__Req req = KW__REQ__INIT;
  req.if_ = 1;
  req.default_ = 2;
  assert_int_equal(req.if_ + req.default_, 3);
  Kw__Keywords_SluiceHandlers h = {.class_ = NULL,
                                   .new_ = NULL,
                                   .delete_ = NULL,
                                   .plain = NULL,
                                   .operator_ = NULL};
  (void)h;
  assert_int_equal(kw__keywords__sluice_service.n_methods, 5);
  check_method(&kw__keywords__sluice_methods[4], "/kw.Keywords/Operator",
               "Operator", &kw__req__descriptor, &kw__req__descriptor,
               SLUICE_CALL_BIDI_STREAMING);
  assert_non_null(kw__keywords__operator__send);
  check_method(&kw__keywords__sluice_methods[0], "/kw.Keywords/Class", "Class",
               &kw__req__descriptor, &kw__req__descriptor, SLUICE_CALL_UNARY);
  /* Function names are prefixed, so they need no escaping. */
  assert_non_null(kw__keywords__class__async);
  assert_non_null(kw__keywords__delete__reply);
}

/* The streaming contract, as types: each new function is assigned to a
 * pointer of exactly the expected type, each handler typedef to the
 * expected function-pointer type, so -Werror catches any drift. */
static int (*const st_download_start)(
    sluice_channel *, const Streaming__Summary *, const sluice_call_opts *,
    const Streaming__Streamer__Download_Handlers *, void *,
    sluice_call **) = streaming__streamer__download__start;
static int (*const st_upload_start)(
    sluice_channel *, const sluice_call_opts *,
    const Streaming__Streamer__Upload_Handlers *, void *,
    sluice_call **) = streaming__streamer__upload__start;
static int (*const st_upload_send)(sluice_call *, const Streaming__Chunk *) =
    streaming__streamer__upload__send;
static int (*const st_chat_start)(sluice_channel *, const sluice_call_opts *,
                                  const Streaming__Streamer__Chat_Handlers *,
                                  void *, sluice_call **) =
    streaming__streamer__chat__start;
static int (*const st_chat_send)(sluice_call *, const Streaming__Chunk *) =
    streaming__streamer__chat__send;
static int (*const st_upload_reply)(sluice_server_call *,
                                    const Streaming__Summary *) =
    streaming__streamer__upload__reply;
static int (*const st_download_send_response)(sluice_server_call *,
                                              const Streaming__Chunk *) =
    streaming__streamer__download__send_response;
static int (*const st_chat_send_response)(sluice_server_call *,
                                          const Streaming__Item *) =
    streaming__streamer__chat__send_response;
static int (*const st_unary_reply)(sluice_server_call *,
                                   const Streaming__Item *) =
    streaming__streamer__unary__reply;
static int (*const st_upload_set_handlers)(
    sluice_server_call *, const Streaming__Streamer__Upload_ServerHandlers *,
    void *) = streaming__streamer__upload__set_handlers;
static int (*const st_download_set_handlers)(
    sluice_server_call *, const Streaming__Streamer__Download_ServerHandlers *,
    void *) = streaming__streamer__download__set_handlers;
static int (*const st_chat_set_handlers)(
    sluice_server_call *, const Streaming__Streamer__Chat_ServerHandlers *,
    void *) = streaming__streamer__chat__set_handlers;
static int (*const os_feed_start)(sluice_channel *, const sluice_call_opts *,
                                  const Streaming__OnlyStreams__Feed_Handlers *,
                                  void *, sluice_call **) =
    streaming__only_streams__feed__start;
static int (*const os_watch_start)(
    sluice_channel *, const Streaming__Item *, const sluice_call_opts *,
    const Streaming__OnlyStreams__Watch_Handlers *, void *,
    sluice_call **) = streaming__only_streams__watch__start;

/* Typed callbacks of every member of the typed handler structs: the client
 * gets the response type, the server the request type (Upload: Chunk in,
 * Summary out; Download: Summary in, Chunk out; Chat: Chunk in, Item out),
 * so a swapped type would not compile. */
static void c_md(sluice_call *call, const sluice_metadata *md, void *ud) {
  (void)call;
  (void)md;
  (void)ud;
}
static void c_ready(sluice_call *call, void *ud) {
  (void)call;
  (void)ud;
}
static void c_done(sluice_call *call, const sluice_status *st, void *ud) {
  (void)call;
  (void)st;
  (void)ud;
}
static void c_summary(sluice_call *call, const Streaming__Summary *m,
                      void *ud) {
  (void)call;
  (void)m;
  (void)ud;
}
static void c_chunk(sluice_call *call, const Streaming__Chunk *m, void *ud) {
  (void)call;
  (void)m;
  (void)ud;
}
static void c_item(sluice_call *call, const Streaming__Item *m, void *ud) {
  (void)call;
  (void)m;
  (void)ud;
}
static void s_chunk(sluice_server_call *call, const Streaming__Chunk *m,
                    void *ud) {
  (void)call;
  (void)m;
  (void)ud;
}
static void s_summary(sluice_server_call *call, const Streaming__Summary *m,
                      void *ud) {
  (void)call;
  (void)m;
  (void)ud;
}
static void s_event(sluice_server_call *call, void *ud) {
  (void)call;
  (void)ud;
}
static void s_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)call;
  (void)cancelled;
  (void)ud;
}

static void st_unary(sluice_server_call *call, const Streaming__Item *req,
                     void *user_data) {
  (void)call;
  (void)req;
  (void)user_data;
}

static void st_upload(sluice_server_call *call, void *user_data) {
  (void)call;
  (void)user_data;
}

static void st_download(sluice_server_call *call, const Streaming__Summary *req,
                        void *user_data) {
  (void)call;
  (void)req;
  (void)user_data;
}

static void st_chat(sluice_server_call *call, void *user_data) {
  (void)call;
  (void)user_data;
}

static void test_streaming(void **state) {
  (void)state;
  const sluice_method_desc *m = streaming__streamer__sluice_methods;
  assert_int_equal(streaming__streamer__sluice_service.n_methods, 4);
  check_method(&m[0], "/streaming.Streamer/Unary", "Unary",
               &streaming__item__descriptor, &streaming__item__descriptor,
               SLUICE_CALL_UNARY);
  check_method(&m[1], "/streaming.Streamer/Upload", "Upload",
               &streaming__chunk__descriptor, &streaming__summary__descriptor,
               SLUICE_CALL_CLIENT_STREAMING);
  check_method(&m[2], "/streaming.Streamer/Download", "Download",
               &streaming__summary__descriptor, &streaming__chunk__descriptor,
               SLUICE_CALL_SERVER_STREAMING);
  check_method(&m[3], "/streaming.Streamer/Chat", "Chat",
               &streaming__chunk__descriptor, &streaming__item__descriptor,
               SLUICE_CALL_BIDI_STREAMING);

  /* Handler typedefs: request-streaming handlers get no req. */
  Streaming__Streamer__Unary_Handler hu = st_unary;
  Streaming__Streamer__Upload_Handler hup = st_upload;
  Streaming__Streamer__Download_Handler hd = st_download;
  Streaming__Streamer__Chat_Handler hc = st_chat;
  /* A member for every method, streaming ones included, in .proto order. */
  Streaming__Streamer_SluiceHandlers h = {
      .unary = hu, .upload = hup, .download = hd, .chat = hc};
  assert_int_equal(sizeof h, 4 * sizeof(void (*)(void)));
  assert_ptr_equal(h.upload, st_upload);
  assert_ptr_equal(h.chat, st_chat);
  assert_true(offsetof(Streaming__Streamer_SluiceHandlers, unary) <
              offsetof(Streaming__Streamer_SluiceHandlers, upload));
  assert_true(offsetof(Streaming__Streamer_SluiceHandlers, download) <
              offsetof(Streaming__Streamer_SluiceHandlers, chat));

  /* The typed handler structs: every member of the generic ones, in their
   * order, with the messages typed. */
  const Streaming__Streamer__Upload_Handlers uc = {c_md, c_summary, c_ready,
                                                   c_done};
  const Streaming__Streamer__Download_Handlers dc = {c_md, c_chunk, c_ready,
                                                     c_done};
  const Streaming__Streamer__Chat_Handlers cc = {c_md, c_item, c_ready, c_done};
  const Streaming__Streamer__Upload_ServerHandlers us = {s_chunk, s_event,
                                                         s_event, s_done};
  const Streaming__Streamer__Download_ServerHandlers ds = {s_summary, s_event,
                                                           s_event, s_done};
  const Streaming__Streamer__Chat_ServerHandlers cs = {.on_message = s_chunk,
                                                       .on_half_close = s_event,
                                                       .on_send_ready = s_event,
                                                       .on_done = s_done};
  assert_int_equal(sizeof uc, sizeof(sluice_call_handlers));
  assert_int_equal(sizeof us, sizeof(sluice_server_call_handlers));
  assert_int_equal(offsetof(Streaming__Streamer__Chat_Handlers, on_message),
                   offsetof(sluice_call_handlers, on_message));
  assert_int_equal(offsetof(Streaming__Streamer__Chat_Handlers, on_done),
                   offsetof(sluice_call_handlers, on_done));
  assert_int_equal(
      offsetof(Streaming__Streamer__Chat_ServerHandlers, on_half_close),
      offsetof(sluice_server_call_handlers, on_half_close));
  assert_ptr_equal(dc.on_message, c_chunk);
  assert_ptr_equal(cc.on_message, c_item);
  assert_ptr_equal(uc.on_done, c_done);
  assert_ptr_equal(ds.on_message, s_summary);
  assert_ptr_equal(cs.on_message, s_chunk);
  assert_ptr_equal(us.on_done, s_done);
  assert_non_null(st_upload_set_handlers);
  assert_non_null(st_download_set_handlers);
  assert_non_null(st_chat_set_handlers);

  assert_non_null(st_download_start);
  assert_non_null(st_upload_start);
  assert_non_null(st_upload_send);
  assert_non_null(st_chat_start);
  assert_non_null(st_chat_send);
  assert_non_null(st_upload_reply);
  assert_non_null(st_download_send_response);
  assert_non_null(st_chat_send_response);
  assert_non_null(st_unary_reply);
}

static void test_streaming_only_service(void **state) {
  (void)state;
  assert_int_equal(streaming__only_streams__sluice_service.n_methods, 2);
  check_method(&streaming__only_streams__sluice_methods[0],
               "/streaming.OnlyStreams/Feed", "Feed",
               &streaming__item__descriptor, &streaming__item__descriptor,
               SLUICE_CALL_BIDI_STREAMING);
  check_method(&streaming__only_streams__sluice_methods[1],
               "/streaming.OnlyStreams/Watch", "Watch",
               &streaming__item__descriptor, &streaming__item__descriptor,
               SLUICE_CALL_SERVER_STREAMING);
  /* No placeholder member any more: just the two handlers. */
  Streaming__OnlyStreams_SluiceHandlers h = {.feed = NULL, .watch = NULL};
  assert_int_equal(sizeof h, 2 * sizeof(void (*)(void)));
  Streaming__OnlyStreams__Feed_Handler feed = NULL;
  Streaming__OnlyStreams__Watch_Handler watch = NULL;
  (void)feed;
  (void)watch;
  int (*send_response)(sluice_server_call *, const Streaming__Item *) =
      streaming__only_streams__watch__send_response;
  assert_non_null(send_response);
  assert_non_null(os_feed_start);
  assert_non_null(os_watch_start);
  assert_non_null(streaming__only_streams__feed__send);
  assert_non_null(streaming__only_streams__feed__send_response);
}

static void test_streaming_null_arguments(void **state) {
  (void)state;
  const Streaming__Streamer__Download_Handlers hs = {.on_done = c_done};
  const Streaming__Streamer__Upload_Handlers hu = {.on_done = c_done};
  const Streaming__Streamer__Chat_Handlers hc = {.on_done = c_done};
  sluice_call *call = NULL;
  /* Caught by the generated code before the runtime is asked. */
  assert_int_equal(st_download_start(NULL, NULL, NULL, &hs, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_null(call);
  assert_int_equal(st_upload_send(NULL, NULL), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(st_chat_send(NULL, NULL), SLUICE_ERR_INVALID_ARG);
  assert_int_equal(st_download_send_response(NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(st_chat_send_response(NULL, NULL), SLUICE_ERR_INVALID_ARG);
  /* Refused by the runtime: no channel. Nothing fires, no handle. */
  Streaming__Summary sum = STREAMING__SUMMARY__INIT;
  assert_int_equal(st_download_start(NULL, &sum, NULL, &hs, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(st_upload_start(NULL, NULL, &hu, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(st_chat_start(NULL, NULL, &hc, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  /* No handler struct, or one without on_done: refused, nothing starts. */
  assert_int_equal(st_download_start(NULL, &sum, NULL, NULL, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_int_equal(st_chat_start(NULL, NULL, NULL, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  const Streaming__Streamer__Chat_Handlers no_done = {.on_message = c_item};
  assert_int_equal(st_chat_start(NULL, NULL, &no_done, NULL, &call),
                   SLUICE_ERR_INVALID_ARG);
  assert_null(call);
  assert_int_equal(st_chat_set_handlers(NULL, NULL, NULL),
                   SLUICE_ERR_INVALID_ARG);
  const Streaming__Streamer__Chat_ServerHandlers sh = {.on_done = s_done};
  assert_int_equal(st_chat_set_handlers(NULL, &sh, NULL),
                   SLUICE_ERR_INVALID_ARG);
  Streaming__Chunk chunk = STREAMING__CHUNK__INIT;
  assert_int_equal(st_upload_send(NULL, &chunk), SLUICE_ERR_INVALID_ARG);
  Streaming__Streamer_SluiceHandlers h = {0};
  assert_int_equal(streaming__streamer__sluice_register(NULL, &h, NULL),
                   SLUICE_ERR_INVALID_ARG);
}

static void test_option_defaults(void **state) {
  (void)state;
  const sluice_method_desc *m = defaults__limited__sluice_methods;
  assert_int_equal(defaults__limited__sluice_service.n_methods, 3);
  assert_string_equal(m[0].path, "/defaults.Limited/Bounded");
  assert_true(m[0].default_timeout_ms == 250);
  assert_int_equal(m[0].max_request_size, 1024);
  assert_int_equal(m[0].max_response_size, 2048);
  assert_true(m[1].default_timeout_ms == UINT64_C(5000000000));
  assert_int_equal(m[1].max_request_size, 0);
  assert_int_equal(m[1].max_response_size, 0);
  check_no_defaults(&m[2]);
}

/* Retry and hedging policies: a config per method that declares one, with
 * the method's other options repeated in it; NULL for the others. */
static void test_option_policies(void **state) {
  (void)state;
  const sluice_method_desc *m = policies__resilient__sluice_methods;
  assert_int_equal(policies__resilient__sluice_service.n_methods, 6);

  const sluice_method_config *c = m[0].config; /* Retried */
  assert_non_null(c);
  assert_true(c->timeout_ms == 250);
  assert_true(m[0].default_timeout_ms == 250);
  assert_int_equal(c->wait_for_ready, -1);
  assert_int_equal(c->max_request_bytes, 1024);
  assert_int_equal(c->max_response_bytes, 2048);
  assert_int_equal(c->has_retry, 1);
  assert_int_equal(c->has_hedging, 0);
  assert_int_equal(c->retry.max_attempts, 4);
  assert_int_equal(c->retry.initial_backoff_ms, 100);
  assert_int_equal(c->retry.max_backoff_ms, 1000);
  assert_true(c->retry.backoff_multiplier == 1.5);
  assert_int_equal(c->retry.retryable_codes,
                   SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE) |
                       SLUICE_CODE_BIT(SLUICE_STATUS_RESOURCE_EXHAUSTED));

  c = m[1].config; /* RetriedAlone: set field by field */
  assert_non_null(c);
  assert_true(c->timeout_ms == 0);
  assert_int_equal(c->max_request_bytes, 0);
  assert_int_equal(c->has_retry, 1);
  assert_int_equal(c->retry.max_attempts, 2);
  assert_int_equal(c->retry.initial_backoff_ms, 1);
  assert_int_equal(c->retry.max_backoff_ms, 1);
  assert_true(c->retry.backoff_multiplier == 2.0);
  assert_int_equal(c->retry.retryable_codes,
                   SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE));

  c = m[2].config; /* Hedged */
  assert_non_null(c);
  assert_true(c->timeout_ms == UINT64_C(5000000000));
  assert_int_equal(c->has_retry, 0);
  assert_int_equal(c->has_hedging, 1);
  assert_int_equal(c->hedging.max_attempts, 3);
  assert_int_equal(c->hedging.hedging_delay_ms, 50);
  assert_int_equal(c->hedging.non_fatal_codes,
                   SLUICE_CODE_BIT(SLUICE_STATUS_UNAVAILABLE) |
                       SLUICE_CODE_BIT(SLUICE_STATUS_INTERNAL) |
                       SLUICE_CODE_BIT(SLUICE_STATUS_ABORTED));

  c = m[3].config; /* HedgedStream */
  assert_int_equal(m[3].kind, SLUICE_CALL_SERVER_STREAMING);
  assert_non_null(c);
  assert_int_equal(c->has_hedging, 1);
  assert_int_equal(c->hedging.max_attempts, 5);
  assert_int_equal(c->hedging.hedging_delay_ms, 0);
  assert_int_equal(c->hedging.non_fatal_codes, 0);

  /* OnlyTimeout: no policy, no config; the timeout stays in the desc. */
  assert_null(m[4].config);
  assert_true(m[4].default_timeout_ms == 10);
  check_no_defaults(&m[5]); /* Plain */

  /* Different methods, different configs. */
  assert_ptr_not_equal(m[0].config, m[1].config);
}

/* ---- the embedded FileDescriptorProtos (server reflection) */

/* Everything unpacked here comes from one arena, freed at once: the
 * comparison clears pointers (json_name), which free_unpacked would then
 * miss. */
typedef struct arena_block {
  struct arena_block *next;
  max_align_t data[];
} arena_block;

static void *arena_alloc(void *ud, size_t size) {
  arena_block **head = ud;
  arena_block *b = malloc(sizeof *b + size);
  if (!b)
    return NULL;
  b->next = *head;
  *head = b;
  return b->data;
}

static void arena_nofree(void *ud, void *p) {
  (void)ud;
  (void)p;
}

static arena_block *arena_head;
static ProtobufCAllocator arena = {arena_alloc, arena_nofree, &arena_head};

static void arena_clear(void) {
  while (arena_head) {
    arena_block *b = arena_head;
    arena_head = b->next;
    free(b);
  }
}

static void clear_json_names(Google__Protobuf__DescriptorProto *m) {
  for (size_t i = 0; i < m->n_field; i++)
    m->field[i]->json_name = NULL;
  for (size_t i = 0; i < m->n_extension; i++)
    m->extension[i]->json_name = NULL;
  for (size_t i = 0; i < m->n_nested_type; i++)
    clear_json_names(m->nested_type[i]);
}

/* f packed, without json_name (protoc fills it in for plugins, not in
 * --descriptor_set_out) and source_code_info. */
static uint8_t *normal_bytes(Google__Protobuf__FileDescriptorProto *f,
                             size_t *len) {
  f->source_code_info = NULL;
  for (size_t i = 0; i < f->n_message_type; i++)
    clear_json_names(f->message_type[i]);
  for (size_t i = 0; i < f->n_extension; i++)
    f->extension[i]->json_name = NULL;
  *len = protobuf_c_message_get_packed_size(&f->base);
  uint8_t *b = malloc(*len ? *len : 1);
  assert_non_null(b);
  protobuf_c_message_pack(&f->base, b);
  return b;
}

/* protoc's own FileDescriptorSet of the test protos (--include_imports,
 * written at build time: PLUGIN_DESCRIPTOR_SET). */
static Google__Protobuf__FileDescriptorSet *read_set(void) {
  FILE *fp = fopen(PLUGIN_DESCRIPTOR_SET, "rb");
  assert_non_null(fp);
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  assert_true(n > 0 && n < sizeof buf);
  Google__Protobuf__FileDescriptorSet *set =
      google__protobuf__file_descriptor_set__unpack(&arena, n, buf);
  assert_non_null(set);
  return set;
}

/* Each embedded file parses back to the FileDescriptorProto protoc has
 * for it; the names are want[], in that order (the file first, then its
 * imports, each once). */
static void check_files(const Google__Protobuf__FileDescriptorSet *set,
                        const sluice_file_descriptor *files, size_t n,
                        const char *const *want, size_t n_want) {
  assert_int_equal(n, n_want);
  for (size_t i = 0; i < n; i++) {
    Google__Protobuf__FileDescriptorProto *got =
        google__protobuf__file_descriptor_proto__unpack(&arena, files[i].size,
                                                        files[i].data);
    assert_non_null(got);
    assert_string_equal(got->name, want[i]);
    assert_null(got->source_code_info);
    Google__Protobuf__FileDescriptorProto *ref = NULL;
    for (size_t j = 0; j < set->n_file; j++)
      if (strcmp(set->file[j]->name, got->name) == 0)
        ref = set->file[j];
    assert_non_null(ref);
    size_t a_len, b_len;
    uint8_t *a = normal_bytes(got, &a_len);
    uint8_t *b = normal_bytes(ref, &b_len);
    assert_int_equal(a_len, b_len);
    assert_memory_equal(a, b, a_len);
    free(a);
    free(b);
  }
}

static void test_embedded_descriptors(void **state) {
  (void)state;
  Google__Protobuf__FileDescriptorSet *set = read_set();
  static const char *const importer[] = {"imports/a.proto", "imports/b.proto"};
  check_files(set, imp__svc__importer__sluice_files,
              sizeof imp__svc__importer__sluice_files /
                  sizeof imp__svc__importer__sluice_files[0],
              importer, 2);
  /* sluice/options.proto and what it imports come along. */
  static const char *const limited[] = {"defaults.proto",
                                        "sluice/options.proto",
                                        "google/protobuf/descriptor.proto"};
  check_files(set, defaults__limited__sluice_files,
              sizeof defaults__limited__sluice_files /
                  sizeof defaults__limited__sluice_files[0],
              limited, 3);
  static const char *const hello[] = {"helloworld.proto"};
  check_files(set, helloworld__greeter__sluice_files,
              sizeof helloworld__greeter__sluice_files /
                  sizeof helloworld__greeter__sluice_files[0],
              hello, 1);
  (void)set;
  arena_clear();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedded_descriptors),
      cmocka_unit_test(test_helloworld),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_no_package),
      cmocka_unit_test(test_nested),
      cmocka_unit_test(test_dotted_package),
      cmocka_unit_test(test_several_services),
      cmocka_unit_test(test_imports),
      cmocka_unit_test(test_keywords),
      cmocka_unit_test(test_streaming),
      cmocka_unit_test(test_streaming_only_service),
      cmocka_unit_test(test_streaming_null_arguments),
      cmocka_unit_test(test_option_defaults),
      cmocka_unit_test(test_option_policies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
