/* notes_server: the out-of-tree example's server (examples/external/).
 *
 *   notes_server [PORT]
 *
 * Serves notes.Notebook on 127.0.0.1:PORT (default 0: a free port), prints
 * "listening on <port>" once it accepts, and stops gracefully on SIGINT or
 * SIGTERM. It leaves SIGPIPE alone on purpose: the library must survive a
 * client that vanishes mid-response without the application's help.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/sluice.h>

#include "notes.sluice.h"

#define MAX_NOTES 1024
#define MAX_TEXT 1024

/* Handlers run on the server's loop threads, several at once: the notes
 * are under a mutex. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *notes[MAX_NOTES];
static unsigned n_notes;

static void add(sluice_server_call *call, const Notes__Note *req,
                void *user_data) {
  (void)user_data;
  if (req->text == NULL || strlen(req->text) > MAX_TEXT) {
    sluice_server_call_finish(call, SLUICE_STATUS_INVALID_ARGUMENT,
                              "a note holds at most 1024 bytes", NULL);
    return;
  }
  char *copy = strdup(req->text);
  pthread_mutex_lock(&mu);
  unsigned id = 0;
  if (copy != NULL && n_notes < MAX_NOTES) {
    notes[n_notes++] = copy;
    id = n_notes;
  }
  pthread_mutex_unlock(&mu);
  if (id == 0) {
    free(copy);
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "the notebook is full", NULL);
    return;
  }
  Notes__AddReply reply = NOTES__ADD_REPLY__INIT;
  reply.id = id;
  notes__notebook__add__reply(call, &reply);
}

/* A few small notes fit the call's send queue (256 KiB by default), so
 * they are all queued at once; a bigger notebook would send the rest from
 * on_send_ready. */
static void list(sluice_server_call *call, const Notes__ListRequest *req,
                 void *user_data) {
  (void)req;
  (void)user_data;
  int rc = 0;
  pthread_mutex_lock(&mu);
  for (unsigned i = 0; i < n_notes && rc == 0; i++) {
    Notes__Note note = NOTES__NOTE__INIT;
    note.id = i + 1;
    note.text = notes[i];
    rc = notes__notebook__list__send_response(call, &note);
  }
  pthread_mutex_unlock(&mu);
  if (rc == 0)
    sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL, NULL);
  else
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              sluice_strerror(rc), NULL);
}

int main(int argc, char **argv) {
  const char *port = argc > 1 ? argv[1] : "0";
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%s", port);

  /* Block the stop signals before the library starts its threads, so that
   * only sigwait() below sees them. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);

  sluice_server *srv;
  int rc = sluice_server_new(&srv, NULL);
  if (rc != 0) {
    fprintf(stderr, "notes_server: %s\n", sluice_strerror(rc));
    return 1;
  }
  const Notes__Notebook_SluiceHandlers h = {.add = add, .list = list};
  int bound = 0;
  if ((rc = notes__notebook__sluice_register(srv, &h, NULL)) != 0 ||
      (rc = sluice_server_listen(srv, addr, &bound)) != 0 ||
      (rc = sluice_server_start(srv)) != 0) {
    fprintf(stderr, "notes_server: %s: %s\n", addr, sluice_strerror(rc));
    sluice_server_del(srv);
    return 1;
  }
  printf("listening on %d\n", bound);
  fflush(stdout);

  int sig;
  sigwait(&stop, &sig);
  sluice_server_shutdown(srv, 2000);
  sluice_server_del(srv);
  for (unsigned i = 0; i < n_notes; i++)
    free(notes[i]);
  return 0;
}
