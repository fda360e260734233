/* The nghttp2 session set-up shared by client and server connections. */
#include "transport/h2session.h"

#include <uv.h>

#include "sluice/status.h"
#include "sluice/types.h"
#include "transport/h2mem.h"

static nghttp2_option *g_options;
static uv_once_t g_once = UV_ONCE_INIT;

static void init_options(void) {
  nghttp2_option *o;
  if (nghttp2_option_new(&o) != 0)
    return;
  /* Window updates follow delivery (transport/recv.h): bounded memory for
   * a paused or slow receiver. */
  nghttp2_option_set_no_auto_window_update(o, 1);
#if NGHTTP2_VERSION_NUM >= 0x013200
  /* gRPC's ASCII metadata values are printable ASCII, space included at
   * either end (include/sluice/metadata.h, as gRPC core and grpc-go take
   * them); RFC 9113's ban of leading and trailing whitespace, which
   * nghttp2 >= 1.50 enforces by resetting the stream (PROTOCOL_ERROR),
   * would fail such calls with INTERNAL in both directions. */
  nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(o, 1);
#endif
  g_options = o;
}

int sluice__h2session_new(nghttp2_session **out, sluice__h2_role role,
                          const nghttp2_session_callbacks *cbs, void *ud,
                          sluice__h2mem_guard *guard) {
  uv_once(&g_once, init_options);
  if (!g_options || !cbs)
    return SLUICE_ERR_NOMEM;
  nghttp2_mem mem; /* copied by nghttp2 */
  sluice__h2mem_for(&mem, guard);
  int rv = role == SLUICE__H2_SERVER
               ? nghttp2_session_server_new3(out, cbs, ud, g_options, &mem)
               : nghttp2_session_client_new3(out, cbs, ud, g_options, &mem);
  if (rv != 0)
    sluice__h2mem_guard_release(guard);
  return rv == 0 ? 0 : SLUICE_ERR_NOMEM;
}

void sluice__h2session_del(nghttp2_session *s, sluice__h2mem_guard *guard) {
  nghttp2_session_del(s);
  sluice__h2mem_guard_release(guard);
}

void sluice__h2session_settings(nghttp2_session *s, sluice__h2_role role,
                                uint32_t max_concurrent_streams,
                                uint32_t max_header_list_size) {
  nghttp2_settings_entry iv[4];
  iv[0].settings_id = NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE;
  iv[0].value = SLUICE_STREAM_WINDOW;
  if (role == SLUICE__H2_SERVER) {
    iv[1].settings_id = NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS;
    iv[1].value = max_concurrent_streams;
  } else {
    iv[1].settings_id = NGHTTP2_SETTINGS_ENABLE_PUSH;
    iv[1].value = 0;
  }
  iv[2].settings_id = NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE;
  iv[2].value = max_header_list_size;
  /* RFC 9218 scheduling of what we send: a message stream that is not
   * incremental (urgency and incremental at their defaults) goes out whole
   * before the next one starts, instead of RFC 7540's round robin of
   * 16 KiB frames over all of them, where every large message finishes
   * together, at the end. Measured (bench/run_large.sh cells, 8 unary
   * echos in flight on one connection): the server alone, 256 KiB ~5.8k
   * -> ~8k calls/s; the client too, 1 MiB ~1.35k -> ~1.58k. Streams that
   * may never end take turns: a server marks the responses of streaming
   * methods incremental (server_call.c); nghttp2 lets only a server do
   * that, so a client's streams of requests give up their turn every
   * SLUICE__STREAM_QUANTUM bytes instead (transport/stream.h). */
  iv[3].settings_id = NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES;
  iv[3].value = 1;
  nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, 4);
  nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0,
                                        (int32_t)SLUICE__CONN_WINDOW);
}
