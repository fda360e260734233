/* interop_sync: a synchronous view of one asynchronous sluice call, for
 * test code that reads top to bottom.
 *
 * The call's callbacks (on the channel's loop thread) copy what arrives into
 * the object under a mutex: each response message (with its compressed
 * flag) into a queue, the final status (code, message and both metadata
 * lists) once on_done fires. The test's thread sends, takes messages off the
 * queue and waits for the end, each wait bounded by ISYNC_WAIT_MS.
 *
 *   isync *s;
 *   isync_start(&s, ch, &methods[i], NULL, &opts);   // streaming requests
 *   isync_send(s, &req.base, 0);
 *   isync_close_send(s);
 *   ProtobufCMessage *m; int compressed;
 *   while (isync_next(s, &m, &compressed) == 1) { ...; isync_free_msg(m); }
 *   isync_wait_done(s);  s->status.code ...
 *   isync_destroy(s);
 *
 * One thread at a time uses an isync (besides the library's callbacks).
 */
#ifndef INTEROP_SYNC_H
#define INTEROP_SYNC_H

#include <pthread.h>

#include <sluice/sluice.h>

/* The longest any wait of this file lasts. */
#define ISYNC_WAIT_MS 10000

typedef struct isync_msg isync_msg;

typedef struct isync {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* CLOCK_MONOTONIC */
  sluice_call *call;      /* our reference, released by isync_destroy */
  isync_msg *head, *tail; /* received, not yet taken */
  unsigned long received; /* messages delivered so far */
  unsigned ready_gen;     /* bumped by on_send_ready */
  int copy_failed;        /* a received message could not be copied */
  int done;               /* on_done fired: status is set */
  sluice_status status;   /* the final status, owned (copies) */
} isync;

/* Starts a call of method on ch. req: the single request of a unary or
 * server-streaming method (sent and half-closed at once,
 * sluice_call_start_msg), or NULL for methods whose requests are sent with
 * isync_send. opts may be NULL. On success *out is the new object (free it
 * with isync_destroy) and 0 is returned; else a SLUICE_ERR_* value and *out
 * is NULL. */
int isync_start(isync **out, sluice_channel *ch,
                const sluice_method_desc *method, const ProtobufCMessage *req,
                const sluice_call_opts *opts);

/* Sends msg (flags as sluice_call_send_ex). When the send queue is full,
 * waits (bounded) for on_send_ready and tries again. Returns 0 or the
 * SLUICE_ERR_* of the last attempt (SLUICE_ERR_FULL after the wait ran
 * out). */
int isync_send(isync *s, const ProtobufCMessage *msg, unsigned flags);

/* Half-closes. Returns as sluice_call_close_send. */
int isync_close_send(isync *s);

/* Cancels the call (on_done will report CANCELLED unless it already fired).
 */
void isync_cancel(isync *s);

/* The next response message: 1 with *msg (owned by the caller: free it with
 * isync_free_msg) and *compressed (may be NULL) set; 0 when the call is over
 * and every message was taken; -1 when nothing came within ISYNC_WAIT_MS. */
int isync_next(isync *s, ProtobufCMessage **msg, int *compressed);

/* Waits (bounded) for on_done. Returns 0 (s->status is the final status)
 * or -1 (timed out). Messages not taken stay queued. */
int isync_wait_done(isync *s);

/* Non-zero when a received message was lost because it could not be
 * copied (out of memory). */
int isync_copy_failed(isync *s);

/* Frees a message returned by isync_next. NULL is ignored. */
void isync_free_msg(ProtobufCMessage *msg);

/* Cancels the call if on_done has not fired, waits (bounded) for on_done,
 * releases the handle and frees everything. Should on_done never come, the
 * object is left allocated (its callbacks may still run) and a warning is
 * printed. NULL is ignored. */
void isync_destroy(isync *s);

/* A copy of md (NULL for NULL); NULL also when out of memory. */
sluice_metadata *isync_metadata_copy(const sluice_metadata *md);

#endif
