/* The nghttp2 session set-up both roles share: the options (no automatic
 * WINDOW_UPDATE: windows follow delivery, transport/recv.h), the allocator
 * (transport/h2mem.h), the first SETTINGS and the windows. Each role keeps
 * its own callback table. Loop thread only, except where noted.
 */
#ifndef SLUICE_TRANSPORT_H2SESSION_H
#define SLUICE_TRANSPORT_H2SESSION_H

#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "transport/h2mem.h"

/* Receive windows: SLUICE_STREAM_WINDOW (1 MiB) per stream and 16 MiB per
 * connection, so a 4 MiB message does not stall on WINDOW_UPDATE round
 * trips while what one slow call can make us buffer stays bounded. */
#define SLUICE__CONN_WINDOW (16u << 20)

typedef enum { SLUICE__H2_CLIENT = 0, SLUICE__H2_SERVER = 1 } sluice__h2_role;

/* Creates a session for role with the callback table cbs (the caller's,
 * created once) and user data ud, whose allocations report failures to
 * guard (zeroed; it outlives the session: transport/h2mem.h). Any thread.
 * Returns 0 or SLUICE_ERR_NOMEM. */
int sluice__h2session_new(nghttp2_session **out, sluice__h2_role role,
                          const nghttp2_session_callbacks *cbs, void *ud,
                          sluice__h2mem_guard *guard);

/* Deletes s, then frees what its guard held. */
void sluice__h2session_del(nghttp2_session *s, sluice__h2mem_guard *guard);

/* Queues the first SETTINGS (the stream window and max_header_list_size,
 * which the caller enforces on what it receives; the client also disables
 * push, the server announces max_concurrent_streams) and widens the
 * connection window to SLUICE__CONN_WINDOW. */
void sluice__h2session_settings(nghttp2_session *s, sluice__h2_role role,
                                uint32_t max_concurrent_streams,
                                uint32_t max_header_list_size);

/* RFC 9113 6.5.2: the size of one header field in a header list. */
static inline size_t sluice__h2_field_size(size_t nlen, size_t vlen) {
  return nlen + vlen + 32;
}

/* The peer's SETTINGS_MAX_HEADER_LIST_SIZE (UINT32_MAX until it says). */
static inline uint32_t sluice__h2_peer_max_header_list(nghttp2_session *s) {
  return nghttp2_session_get_remote_settings(
      s, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE);
}

/* The default of both sides' max_header_list_size options. */
#define SLUICE__MAX_HEADER_LIST_DEFAULT (16u * 1024)

#endif
