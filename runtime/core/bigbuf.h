/* A process-wide cache of large message buffers (>= SLUICE__BIGBUF_MIN).
 *
 * Why: every large message passes through three or four buffers of its own
 * size (reassembly, the unpacked bytes field, the packed reply), each one
 * malloc'd and freed per call. glibc serves such sizes from mmap or from a
 * thread arena whose top it trims back to the kernel as soon as more than
 * its trim threshold is free, so under a steady stream of 1 MiB calls the
 * same pages are unmapped and faulted in again for every message: measured,
 * a sluice echo server spent ~35 % of its CPU in page faults and served a
 * gRPC C++ client 131 calls/s at 1 MiB (641/s with the trimming turned off
 * through GLIBC_TUNABLES). A library must not change the process's malloc
 * settings, so it keeps a few recently freed large blocks itself.
 *
 * The blocks are plain malloc'd memory: anything got here may be freed with
 * free() (an application freeing an unpacked message with the system
 * allocator simply takes that block out of the cache's reach), and any
 * malloc'd pointer may be put here (sizes are read back with
 * malloc_usable_size). Bounded: at most SLUICE__BIGBUF_SLOTS blocks and
 * SLUICE__BIGBUF_MAX_BYTES in all; a block unused for SLUICE__BIGBUF_AGE_MS
 * is freed by the next get or put. Any thread; one mutex, taken only for
 * large sizes. Under AddressSanitizer cached blocks are poisoned.
 */
#ifndef SLUICE_CORE_BIGBUF_H
#define SLUICE_CORE_BIGBUF_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#define SLUICE__BIGBUF_MIN (64u * 1024)
#define SLUICE__BIGBUF_SLOTS 16
#define SLUICE__BIGBUF_MAX_BYTES (16u << 20)
#define SLUICE__BIGBUF_AGE_MS 2000
/* Bytes a new block gets beyond the class of its request (bigbuf.c). */
#define SLUICE__BIGBUF_HEADROOM 64u

/* A block of at least len bytes (a cached one when len is large and one
 * fits), NULL when out of memory. Its contents are undefined. Give it back
 * with sluice__bigbuf_put, or free(). */
void *sluice__bigbuf_get(size_t len);

/* Takes p (any malloc'd pointer, or NULL) back: cached when it is large
 * and the cache has room, freed otherwise. */
void sluice__bigbuf_put(void *p);

/* Frees every cached block (tests, and leak checkers at exit). */
void sluice__bigbuf_drain(void);

/* Gives free memory back to the system: the cached blocks, and with glibc
 * the free pages malloc keeps (malloc_trim). Costs a walk over malloc's
 * free lists (a few milliseconds for a large heap): for rare moments, such
 * as a server that just lost most of its connections. */
void sluice__mem_trim(void);

/* Blocks and bytes cached now (tests). */
void sluice__bigbuf_stats(size_t *blocks, size_t *bytes);

/* protobuf-c's allocator over the cache: unpacked messages whose large
 * fields come from it may be freed with it or with NULL (the system
 * allocator). */
ProtobufCAllocator *sluice__bigbuf_pb_allocator(void);

#endif
