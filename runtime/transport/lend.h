/* Lending queued message bytes to a write batch without copying them.
 *
 * Why: a plaintext flush used to copy every DATA payload byte from the
 * calls' send queues into one contiguous batch and then send() it; with
 * large messages that copy was a quarter of the user-space memmove of an
 * echo server. Now the batch refers to large pieces where they lie in the
 * queues' buffers and hands the kernel an iovec (transport/conn.c).
 *
 * The catch is lifetime: between the moment a piece is lent and the moment
 * the batch is written, the queue may free its buffer -- the stream closes
 * inside the gather (nghttp2 calls on_stream_close from mem_send), the
 * call is aborted and destroyed, or a fully sent buffer leaves the queue.
 * Every one of those frees runs on the loop thread that gathers (the queue
 * frees from other threads only when a retry buffer overflows, and such a
 * queue never lends). So a loop thread opens a lend scope around each
 * batch; a buffer lent in the current scope that its queue frees meanwhile
 * is kept here instead, and freed when the outermost scope closes, after
 * the batch was written or what the socket did not take was copied aside.
 *
 * Buffers are recognised by the scope's epoch, stored in the queue's node
 * when a piece of it is lent (sluice__sendq_lend): an epoch from an earlier
 * scope means nothing is lent any more. Scopes nest (a callback of the
 * gather may flush another connection); the epoch is the outermost one's.
 * Per thread, no locks. */
#ifndef SLUICE_TRANSPORT_LEND_H
#define SLUICE_TRANSPORT_LEND_H

#include <stdint.h>

/* Buffers one thread's open scopes may keep: each lent piece reserves one
 * place (sluice__lend_reserve), so a batch lends at most this many pieces
 * (a full scope makes the batch copy instead). */
#define SLUICE__LEND_MAX 256

/* Opens a scope on the calling thread. */
void sluice__lend_enter(void);

/* Closes it; the outermost close frees every buffer kept. */
void sluice__lend_leave(void);

/* The epoch of the calling thread's open scope, 0 when none is open. */
uint64_t sluice__lend_epoch(void);

/* Reserves the place of one more buffer the scope may have to keep.
 * Returns 1, or 0 when the scope is full (then do not lend). */
int sluice__lend_reserve(void);

/* A queue frees buffer p, lent in the current scope: kept until the
 * outermost scope closes (a place was reserved when it was lent). */
void sluice__lend_keep(void *p);

#endif
