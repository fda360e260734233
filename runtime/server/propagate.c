/* Deadline propagation from a server call to the calls its handler makes.
 */
#include "server/server_internal.h"

void sluice_call_opts_set_parent(sluice_call_opts *o,
                                 const sluice_server_call *parent) {
  if (!o || !parent || !parent->deadline_ns)
    return;
  if (!o->deadline_ns || parent->deadline_ns < o->deadline_ns)
    o->deadline_ns = parent->deadline_ns;
}
