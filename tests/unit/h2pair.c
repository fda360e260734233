/* Two nghttp2 sessions back to back in memory (see h2pair.h). */
#define _POSIX_C_SOURCE 200809L
#include "h2pair.h"

#include <string.h>

int h2pair_init(h2pair *p, const nghttp2_session_callbacks *client_cbs,
                void *client_ud, const nghttp2_session_callbacks *server_cbs,
                void *server_ud, const nghttp2_option *opt) {
  memset(p, 0, sizeof *p);
  int rv = nghttp2_session_client_new2(&p->client, client_cbs, client_ud, opt);
  if (rv != 0)
    return rv;
  rv = nghttp2_session_server_new2(&p->server, server_cbs, server_ud, opt);
  if (rv != 0) {
    nghttp2_session_del(p->client);
    p->client = NULL;
  }
  return rv;
}

/* Everything src has to send, fed to dst as it comes (mem_send's buffer is
 * valid only until its next call). */
static long move(nghttp2_session *src, nghttp2_session *dst, uint64_t *count) {
  long total = 0;
  for (;;) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(src, &data);
    if (n < 0)
      return (long)n;
    if (n == 0)
      return total;
    ssize_t off = 0;
    while (off < n) {
      /* mem_recv takes it all unless a callback paused it. */
      ssize_t r = nghttp2_session_mem_recv(dst, data + off, (size_t)(n - off));
      if (r < 0)
        return (long)r;
      off += r;
    }
    total += (long)n;
    *count += (uint64_t)n;
  }
}

long h2pair_pump_c2s(h2pair *p) {
  return move(p->client, p->server, &p->c2s_bytes);
}

long h2pair_pump_s2c(h2pair *p) {
  return move(p->server, p->client, &p->s2c_bytes);
}

int h2pair_pump(h2pair *p) {
  for (unsigned i = 0; i < H2PAIR_MAX_ROUNDS; i++) {
    p->rounds++;
    long a = h2pair_pump_c2s(p);
    if (a < 0)
      return (int)a;
    long b = h2pair_pump_s2c(p);
    if (b < 0)
      return (int)b;
    if (a == 0 && b == 0)
      return 0;
  }
  return H2PAIR_BUSY;
}

void h2pair_free(h2pair *p) {
  nghttp2_session_del(p->client);
  nghttp2_session_del(p->server);
  p->client = p->server = NULL;
}
