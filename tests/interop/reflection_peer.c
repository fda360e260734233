/* reflection_peer: reflecttest.Reflected (tests/interop/reflecttest.proto)
 * with server reflection on, for test_reflection_py.py: its file declares
 * extensions and imports sluice/options.proto.
 *
 *   reflection_peer [--port N]
 *
 * Say echoes the text. Prints "listening on <port>" on stdout once it
 * accepts (port 0, the default, picks a free one); SIGINT or SIGTERM shut
 * it down. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <sluice/sluice.h>

#include "reflecttest.sluice.h"
#include "serve.h"

static void on_say(sluice_server_call *call, const Reflecttest__Echo *req,
                   void *user_data) {
  (void)user_data;
  Reflecttest__Echo resp = REFLECTTEST__ECHO__INIT;
  resp.text = req->text;
  reflecttest__reflected__say__reply(call, &resp);
}

int main(int argc, char **argv) {
  unsigned long port = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--port") == 0 && i + 1 < argc &&
        sluice_example_parse_ulong(argv[i + 1], 65535, &port) == 0) {
      i++;
      continue;
    }
    fprintf(stderr, "usage: reflection_peer [--port N]\n");
    return 2;
  }
  sigset_t stop_signals;
  sluice_example_block_signals(&stop_signals);
  sluice_server_opts *o;
  sluice_server *srv;
  if (sluice_server_opts_new(&o) != 0)
    return 1;
  if (sluice_server_opts_set_reflection(o, 1) != 0 ||
      sluice_server_new(&srv, o) != 0) {
    sluice_server_opts_del(o);
    return 1;
  }
  sluice_server_opts_del(o);
  Reflecttest__Reflected_SluiceHandlers h = {.say = on_say};
  int rc = reflecttest__reflected__sluice_register(srv, &h, NULL);
  char address[300];
  if (rc == 0 && sluice_example_address(address, sizeof address, "127.0.0.1",
                                        port, "reflection_peer") != 0)
    rc = 1;
  if (rc == 0)
    rc = sluice_example_serve(srv, address, &stop_signals, 1000,
                              "reflection_peer");
  sluice_server_del(srv);
  return rc ? 1 : 0;
}
