/* Deadline propagation from a server call to the calls its handler makes.
 * It lives on the client side: it fills a client call option and reads the
 * server call only through the public accessor. */
#include "sluice/call.h"
#include "sluice/server.h"

void sluice_call_opts_set_parent(sluice_call_opts *o,
                                 const sluice_server_call *parent) {
  uint64_t d = parent ? sluice_server_call_deadline(parent) : 0;
  if (!o || !d)
    return;
  if (!o->deadline_ns || d < o->deadline_ns)
    o->deadline_ns = d;
}
