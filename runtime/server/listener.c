/* Listening sockets and the hand-off of accepted connections to the
 * loops. */
#include "server/listener.h"

#include "transport/addr.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/list.h"
#include "sluice/status.h"

/* Keeps a listening socket; closes fd on failure. */
static int add_listener(sluice__listeners *ls, int fd, const char *path) {
  sluice__listener *l = sluice__realloc(ls->v, (ls->n + 1) * sizeof *l);
  if (!l) {
    close(fd);
    return SLUICE_ERR_NOMEM;
  }
  ls->v = l;
  l = &ls->v[ls->n++];
  memset(l, 0, sizeof *l);
  l->fd = fd;
  l->is_pipe = path != NULL;
  l->path = path ? sluice__strdup(path) : NULL;
  return 0;
}

static int listen_unix(sluice__listeners *ls, const char *path) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  if (!*path || strlen(path) >= sizeof sa.sun_path)
    return SLUICE_ERR_BAD_ADDRESS;
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return SLUICE_ERR_SYSTEM;
  unlink(path); /* a stale socket file from an earlier run */
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(fd, 1024) != 0) {
    close(fd);
    return SLUICE_ERR_BAD_ADDRESS;
  }
  return add_listener(ls, fd, path);
}

int sluice__listeners_add(sluice__listeners *ls, const char *address,
                          int *port_out) {
  if (port_out)
    *port_out = 0;
  if (strncmp(address, "unix:", 5) == 0)
    return listen_unix(ls, address + 5);
  /* host:port or [v6]:port (transport/addr.c) */
  char host[256];
  const char *service;
  if (sluice__addr_split_listen(address, host, sizeof host, &service) != 0)
    return SLUICE_ERR_BAD_ADDRESS;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (getaddrinfo(host[0] ? host : NULL, service, &hints, &res) != 0 || !res)
    return SLUICE_ERR_BAD_ADDRESS;
  int fd =
      socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    return SLUICE_ERR_SYSTEM;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
    freeaddrinfo(res);
    close(fd);
    return SLUICE_ERR_BAD_ADDRESS;
  }
  freeaddrinfo(res);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  int port = ss.ss_family == AF_INET6
                 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  int rv = add_listener(ls, fd, NULL);
  if (rv == 0 && port_out)
    *port_out = port;
  return rv;
}

/* ---- accepting */

/* One accepted socket on its way to a loop. */
typedef struct handoff {
  sluice__task task;
  sluice__listeners *ls;
  sluice__sconn_loop *cl;
  int fd;
  int is_pipe;
} handoff;

static void on_handoff(sluice__task *t) {
  handoff *h = SLUICE__CONTAINER_OF(t, handoff, task);
  if (__atomic_load_n(&h->ls->stopping, __ATOMIC_ACQUIRE) ||
      sluice__sconn_accept(h->cl, h->fd, h->is_pipe) != 0) {
    close(h->fd);
    __atomic_sub_fetch(&h->cl->shared->open, 1, __ATOMIC_RELAXED);
  }
  free(h);
}

static void count(sluice__listeners *ls, sluice_server_conn_event ev) {
  __atomic_add_fetch(&ls->loops[0]->shared->events[ev], 1, __ATOMIC_RELAXED);
}

static void on_listen_readable(uv_poll_t *p, int status, int events);

static void on_resume(uv_timer_t *t) {
  sluice__listeners *ls = t->data;
  if (!ls->open || !ls->paused)
    return;
  ls->paused = 0;
  for (size_t i = 0; i < ls->n; i++)
    uv_poll_start(&ls->v[i].poll, UV_READABLE, on_listen_readable);
}

/* Out of descriptors (or memory): the level-triggered socket would
 * report the same connection again at once, spinning a core; stop polling
 * every socket for a while (as nginx does), the backlog waits in the
 * kernel. */
static void pause_accepting(sluice__listeners *ls) {
  if (ls->paused)
    return;
  ls->paused = 1;
  count(ls, SLUICE_SERVER_ACCEPT_PAUSED);
  for (size_t i = 0; i < ls->n; i++)
    uv_poll_stop(&ls->v[i].poll);
  uv_timer_start(&ls->pause_timer, on_resume, SLUICE__ACCEPT_PAUSE_MS, 0);
}

static void on_listen_readable(uv_poll_t *p, int status, int events) {
  sluice__listeners *ls = p->data;
  sluice__listener *l = SLUICE__CONTAINER_OF(p, sluice__listener, poll);
  sluice__sconn_shared *sh = ls->loops[0]->shared;
  (void)events;
  if (status < 0)
    return;
  /* Drain the backlog, bounded so one burst cannot starve the loop. */
  for (int i = 0; i < 64 && !ls->paused; i++) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM)
        pause_accepting(ls);
      break;
    }
    uint32_t max = sh->opts->max_connections;
    if (max && __atomic_load_n(&sh->open, __ATOMIC_RELAXED) >= max) {
      count(ls, SLUICE_SERVER_CONNECTIONS_REFUSED);
      close(fd);
      continue;
    }
    handoff *h = sluice__malloc(sizeof *h);
    if (!h) {
      close(fd);
      continue;
    }
    __atomic_add_fetch(&sh->open, 1, __ATOMIC_RELAXED);
    memset(h, 0, sizeof *h);
    h->task.fn = on_handoff;
    h->ls = ls;
    h->cl = ls->loops[ls->next++ % ls->n_loops];
    h->fd = fd;
    h->is_pipe = l->is_pipe;
    sluice__loop_post(sluice__sconn_loop_loop(h->cl), &h->task);
  }
}

static void on_start(sluice__task *t) {
  sluice__listeners *ls =
      SLUICE__CONTAINER_OF(t, sluice__listeners, start_task);
  uv_loop_t *uv = sluice__loop_uv(sluice__sconn_loop_loop(ls->loops[0]));
  uv_timer_init(uv, &ls->pause_timer);
  ls->pause_timer.data = ls;
  ls->timer_open = 1;
  for (size_t i = 0; i < ls->n; i++) {
    sluice__listener *l = &ls->v[i];
    uv_poll_init(uv, &l->poll, l->fd);
    l->poll.data = ls;
    uv_poll_start(&l->poll, UV_READABLE, on_listen_readable);
    ls->open++;
  }
}

void sluice__listeners_start(sluice__listeners *ls,
                             sluice__sconn_loop *const *loops, unsigned n) {
  ls->loops = loops;
  ls->n_loops = n;
  ls->start_task.fn = on_start;
  sluice__loop_post(sluice__sconn_loop_loop(loops[0]), &ls->start_task);
}

void sluice__listeners_stop(sluice__listeners *ls) {
  __atomic_store_n(&ls->stopping, 1, __ATOMIC_RELEASE);
}

/* ---- closing */

static void on_listener_closed(uv_handle_t *h) {
  sluice__listener *l = SLUICE__CONTAINER_OF(h, sluice__listener, poll);
  close(l->fd);
  if (l->path)
    unlink(l->path);
  l->fd = -1;
}

void sluice__listeners_close(sluice__listeners *ls) {
  if (ls->timer_open) {
    ls->timer_open = 0;
    uv_close((uv_handle_t *)&ls->pause_timer, NULL);
  }
  for (size_t i = 0; i < ls->n; i++)
    if (ls->v[i].fd >= 0 && ls->open)
      uv_close((uv_handle_t *)&ls->v[i].poll, on_listener_closed);
  ls->open = 0;
}

void sluice__listeners_release(sluice__listeners *ls) {
  for (size_t i = 0; i < ls->n; i++)
    if (ls->v[i].fd >= 0) {
      close(ls->v[i].fd);
      if (ls->v[i].path)
        unlink(ls->v[i].path);
      ls->v[i].fd = -1;
    }
}

void sluice__listeners_free(sluice__listeners *ls) {
  for (size_t i = 0; i < ls->n; i++) {
    if (ls->v[i].fd >= 0)
      close(ls->v[i].fd);
    free(ls->v[i].path);
  }
  free(ls->v);
  ls->v = NULL;
  ls->n = 0;
}
