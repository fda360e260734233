/* The link from a server call to the calls its handler makes: deadline
 * propagation, and the parent the call reports its channel's back-pressure
 * to when it starts (call.c). It lives on the client side: it fills a
 * client call option and reads the server call only through the public
 * accessors. */
#include "sluice/call.h"
#include "sluice/server.h"

void sluice_call_opts_set_parent(sluice_call_opts *o,
                                 const sluice_server_call *parent) {
  if (!o || !parent)
    return;
  o->parent = parent;
  uint64_t d = sluice_server_call_deadline(parent);
  if (!d)
    return;
  if (!o->deadline_ns || d < o->deadline_ns)
    o->deadline_ns = d;
}
