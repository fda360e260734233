/* Listening sockets: bound and listening before the loops start (so the
 * port is known at once), polled on the first loop once they do; accepted
 * sockets are handed to the loops round robin (SO_REUSEPORT's hashing
 * balanced poorly here). */
#ifndef SLUICE_SERVER_LISTENER_H
#define SLUICE_SERVER_LISTENER_H

#include <stddef.h>
#include <uv.h>

#include "core/loop.h"
#include "server/server_conn.h"

/* How long accepting pauses after EMFILE and the like (nginx: 500 ms). */
#define SLUICE__ACCEPT_PAUSE_MS 100

typedef struct sluice__listener {
  int fd; /* -1 once closed */
  int is_pipe;
  uv_poll_t poll; /* data: the set */
  char *path;     /* unix: to unlink on shutdown */
} sluice__listener;

typedef struct sluice__listeners {
  sluice__listener *v;
  size_t n;
  unsigned open; /* first loop only: the sockets are being polled */
  /* hand-off targets, round robin (first loop only) */
  sluice__sconn_loop *const *loops; /* borrowed */
  unsigned n_loops, next;
  int stopping; /* atomic: hand-offs still in flight close their socket */
  /* accept failed for want of descriptors: polling stopped until the
   * timer (first loop only) */
  uv_timer_t pause_timer;
  int timer_open, paused;
  sluice__task start_task;
} sluice__listeners;

/* Binds and listens on address ("host:port", "[v6]:port", "unix:path");
 * *port_out (if not NULL) gets the TCP port, 0 for unix. Returns 0,
 * SLUICE_ERR_BAD_ADDRESS, SLUICE_ERR_SYSTEM or SLUICE_ERR_NOMEM. */
int sluice__listeners_add(sluice__listeners *ls, const char *address,
                          int *port_out);

/* Starts polling the sockets on loops[0]'s loop (posted there) and handing
 * accepted connections to the n loops (the array is borrowed until the
 * loops are gone). */
void sluice__listeners_start(sluice__listeners *ls,
                             sluice__sconn_loop *const *loops, unsigned n);

/* Any thread: hand-offs still in flight close their socket from now on. */
void sluice__listeners_stop(sluice__listeners *ls);

/* On the first loop: stops polling and closes the sockets (unlinking unix
 * paths). */
void sluice__listeners_close(sluice__listeners *ls);

/* Once the loops are gone: closes (and unlinks) what was never polled. */
void sluice__listeners_release(sluice__listeners *ls);

/* Frees the set (closing what is still open). */
void sluice__listeners_free(sluice__listeners *ls);

#endif
