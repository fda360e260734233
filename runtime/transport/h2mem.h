/* The allocator handed to every nghttp2 session: per-thread free lists by
 * size class in front of malloc.
 *
 * Why: nghttp2 allocates and frees about nine small blocks per unary call
 * (stream, outbound items, header arrays, frame buffers). A loop serving
 * 64 calls at once frees them in bursts larger than glibc's per-thread cache
 * (7 blocks per size), so most of them went through malloc's slow paths:
 * ~11 % of an echo server's instructions. Here a freed block goes to the
 * calling thread's list for its class (bounded, see h2mem.c) and the next
 * allocation of that class on that thread takes it back.
 *
 * Thread-safe without locks: every operation uses the calling thread's
 * lists, so a block may be freed on another thread than the one that
 * allocated it (it then joins that thread's list). A thread's lists are
 * freed when it exits.
 */
#ifndef SLUICE_TRANSPORT_H2MEM_H
#define SLUICE_TRANSPORT_H2MEM_H

#include <nghttp2/nghttp2.h>

/* One session's record of failed allocations. nghttp2 treats a failed
 * allocation as fatal to the session, and some of its error paths leave
 * the session inconsistent: nghttp2 1.52 (Debian 12), with RFC 9218
 * priorities, frees a DATA item whose queueing failed and frees it again
 * in nghttp2_session_del (found by tests/failmalloc, reproduced with
 * nghttp2 alone). So once an allocation of a session failed, its frees are
 * held here (each block freed once, in sluice__h2mem_guard_release after
 * the session is deleted) and its connection is closed (conn.c): a short
 * while, so what is held stays small. Zeroed = nothing failed. Loop
 * thread. */
typedef struct sluice__h2mem_guard {
  int failed;
  void **held; /* blocks nghttp2 freed since the failure, duplicates too */
  size_t n, cap;
} sluice__h2mem_guard;

/* The allocator for one session (nghttp2_session_*_new3 copies it): g
 * outlives the session. */
void sluice__h2mem_for(nghttp2_mem *out, sluice__h2mem_guard *g);

/* After nghttp2_session_del: frees every held block once, and resets g. */
void sluice__h2mem_guard_release(sluice__h2mem_guard *g);

/* Gives the calling thread's cached blocks back to malloc now (a thread
 * that is not exiting, e.g. a user's loop thread whose channel is gone;
 * later use simply starts new lists). */
void sluice__h2mem_thread_release(void);

#endif
