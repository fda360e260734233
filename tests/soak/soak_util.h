/* What the soak driver and the soak server both need: clocks, counting a
 * /proc directory (threads, descriptors), and cutting this process's own
 * connected stream sockets (the "drop" chaos). Header only: two small
 * programs, no library of their own. */
#ifndef SLUICE_SOAK_UTIL_H
#define SLUICE_SOAK_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include <sluice/clock.h>

static inline uint64_t soak_now_ms(void) { return sluice_now_ns() / 1000000u; }

static inline void soak_sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000,
                        .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* CLOCK_MONOTONIC now + ms (condition variables use that clock). */
static inline void soak_abs_ms(struct timespec *ts, uint64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

/* Entries of a directory (/proc/self/task, /proc/self/fd), or -1. */
static inline int soak_count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

/* shutdown(2)s every connected stream socket of this process whose peer
 * address want() accepts (NULL: all): a real connection loss under the
 * library's feet, the descriptor left open (no reuse race). Listening
 * sockets have no peer and are skipped. Returns the sockets shut. */
static inline unsigned soak_shutdown_sockets(
    int (*want)(const struct sockaddr_storage *peer, void *ud), void *ud) {
  unsigned n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(d))
      continue;
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM)
      continue;
    struct sockaddr_storage ss;
    len = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
      continue;
    if ((!want || want(&ss, ud)) && shutdown(fd, SHUT_RDWR) == 0)
      n++;
  }
  closedir(d);
  return n;
}

#endif
