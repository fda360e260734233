/* Per-thread scratch buffers for socket I/O.
 *
 * Why: a connection used to own a 64 KiB read buffer and a 272 KiB write
 * batch for its whole life (and over TLS a ciphertext buffer as large as
 * its biggest batch), most of it touched once and then kept resident: the
 * bulk of an idle connection's memory. A read is consumed before the read
 * callback returns and a write batch is handed to the socket before the
 * flush returns, so one buffer per loop thread serves all its connections;
 * only what the socket does not take at once is copied aside, into memory
 * the connection holds until it is written (transport/conn.c).
 *
 * A slot is taken and given back within one callback on the calling
 * thread. A nested take of the same slot (a callback that flushes or reads
 * another connection from inside a flush or read) gets NULL and must use
 * its own memory. The buffers are freed when the thread exits, or by
 * sluice__scratch_thread_release.
 */
#ifndef SLUICE_TRANSPORT_SCRATCH_H
#define SLUICE_TRANSPORT_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  SLUICE__SCRATCH_READ,  /* socket reads, and TLS plaintext from them */
  SLUICE__SCRATCH_WRITE, /* nghttp2 output batches, and TLS ciphertext */
  SLUICE__SCRATCH_N
} sluice__scratch_slot;

#define SLUICE__SCRATCH_READ_SIZE (64 * 1024)
/* A batch of at most 256 KiB plus one frame (<= 16 KiB + its header). */
#define SLUICE__SCRATCH_WRITE_SIZE (256 * 1024 + 16384 + 64)

/* The calling thread's buffer for slot (its size is the slot's *_SIZE), or
 * NULL when the slot is already taken on this thread or out of memory. */
uint8_t *sluice__scratch_take(sluice__scratch_slot slot);

/* Gives slot back (after a successful take). */
void sluice__scratch_give(sluice__scratch_slot slot);

/* Frees the calling thread's buffers now (a user's loop thread whose last
 * channel is gone). Not while a slot is taken. */
void sluice__scratch_thread_release(void);

#endif
