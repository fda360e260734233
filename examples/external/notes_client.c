/* notes_client: the out-of-tree example's client (examples/external/).
 *
 *   notes_client HOST:PORT TEXT...
 *
 * Adds each TEXT as a note (a blocking unary call each), then lists the
 * notebook (a server-streaming call, asynchronous: the main thread waits
 * for on_done on a condition variable). Prints one line per step; exits 0
 * when every call ended OK.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <sluice/sluice.h>

#include "notes.sluice.h"

/* What the List call's callbacks (on the channel's loop thread) share with
 * the main thread. */
typedef struct listing {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  sluice_status_code code;
  char message[256];
} listing;

static void on_note(sluice_call *call, const Notes__Note *note,
                    void *user_data) {
  (void)call;
  (void)user_data;
  printf("note %u: %s\n", note->id, note->text);
}

static void on_done(sluice_call *call, const sluice_status *st,
                    void *user_data) {
  (void)call;
  listing *l = user_data;
  pthread_mutex_lock(&l->mu);
  l->code = st->code;
  snprintf(l->message, sizeof l->message, "%s", st->message);
  l->done = 1;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

static int add_notes(sluice_channel *ch, int n, char **texts) {
  for (int i = 0; i < n; i++) {
    Notes__Note note = NOTES__NOTE__INIT;
    note.text = texts[i];
    Notes__AddReply *reply = NULL;
    sluice_status st;
    sluice_status_init(&st);
    /* NULL options: the method's default deadline (5 s, from notes.proto)
     * applies. */
    if (notes__notebook__add__blocking(ch, &note, &reply, NULL, &st) !=
        SLUICE_STATUS_OK) {
      fprintf(stderr, "add: %s: %s\n", sluice_status_name(st.code), st.message);
      sluice_status_clear(&st);
      return 1;
    }
    printf("added note %u\n", reply->id);
    protobuf_c_message_free_unpacked(&reply->base, NULL);
    sluice_status_clear(&st);
  }
  return 0;
}

static int list_notes(sluice_channel *ch) {
  listing l = {.code = SLUICE_STATUS_UNKNOWN};
  pthread_mutex_init(&l.mu, NULL);
  pthread_cond_init(&l.cv, NULL);
  sluice_call_opts opts;
  sluice_call_opts_init(&opts);
  opts.timeout_ms = 5000; /* bounds the wait below too */
  const Notes__Notebook__List_Handlers h = {.on_message = on_note,
                                            .on_done = on_done};
  Notes__ListRequest req = NOTES__LIST_REQUEST__INIT;
  sluice_call *call = NULL;
  int rc = notes__notebook__list__start(ch, &req, &opts, &h, &l, &call);
  if (rc != 0) {
    fprintf(stderr, "list: %s\n", sluice_strerror(rc));
    return 1;
  }
  /* on_done fires exactly once, at the latest when the deadline passes. */
  pthread_mutex_lock(&l.mu);
  while (!l.done)
    pthread_cond_wait(&l.cv, &l.mu);
  pthread_mutex_unlock(&l.mu);
  sluice_call_release(call);
  printf("list: %s\n", sluice_status_name(l.code));
  if (l.code != SLUICE_STATUS_OK)
    fprintf(stderr, "list: %s\n", l.message);
  pthread_cond_destroy(&l.cv);
  pthread_mutex_destroy(&l.mu);
  return l.code == SLUICE_STATUS_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s HOST:PORT TEXT...\n", argv[0]);
    return 2;
  }
  /* Built against one version, running against another? */
  if (sluice_version_hex() != SLUICE_VERSION_HEX)
    fprintf(stderr, "notes_client: built with sluice %d.%d.%d, running %s\n",
            SLUICE_VERSION_MAJOR, SLUICE_VERSION_MINOR, SLUICE_VERSION_PATCH,
            sluice_version());
  sluice_channel *ch;
  int rc = sluice_channel_new(&ch, argv[1], NULL);
  if (rc != 0) {
    fprintf(stderr, "notes_client: %s: %s\n", argv[1], sluice_strerror(rc));
    return 2;
  }
  rc = add_notes(ch, argc - 2, argv + 2);
  if (rc == 0)
    rc = list_notes(ch);
  sluice_channel_del(ch);
  return rc;
}
