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

/* The allocator, for nghttp2_session_*_new3. */
nghttp2_mem *sluice__h2mem(void);

/* Gives the calling thread's cached blocks back to malloc now (a thread
 * that is not exiting, e.g. a user's loop thread whose channel is gone;
 * later use simply starts new lists). */
void sluice__h2mem_thread_release(void);

#endif
