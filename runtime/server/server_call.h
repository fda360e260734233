/* Server calls as the rest of the server sees them; the call's own struct
 * is private to server_call.c.
 *
 * A call is created by its connection for a new stream and fed what the
 * stream brings: the request headers (parsed by the connection, the call
 * takes what it needs), the route, DATA, END_STREAM, the stream's close.
 * Below it are admission (admit.h), the load report (load_report.h) and
 * the transport connection whose nghttp2 session carries its stream. It
 * calls nothing above it: the handler is run from a task on its loop, and
 * finish may come from any thread.
 *
 * Loop thread only, except where said. */
#ifndef SLUICE_SERVER_CALL_H
#define SLUICE_SERVER_CALL_H

#include <stdint.h>
#include <uv.h>

#include "core/heap.h"
#include "core/list.h"
#include "core/loop.h"
#include "core/objcache.h"
#include "core/wave.h"
#include "server/admit.h"
#include "server/load_report.h"
#include "server/route.h"
#include "server/server_opts.h"
#include "sluice/server.h"
#include "transport/conn.h"
#include "transport/stream.h"
#include "wire/grpc_headers.h"

/* What the calls of one server share. */
typedef struct sluice__scall_shared {
  const sluice_server_opts *opts;
  sluice__load *load;
  sluice__admission *admit;
  int stopped;   /* atomic: the loops are being deleted; finish() from now
                    on parks the call in orphans instead of posting */
  uv_mutex_t mu; /* guards joined and orphans */
  int joined;    /* every loop thread has exited: finish() from now on
                    frees the call on its own thread */
  sluice__list orphans; /* calls finished after stopped, freed once
                           joined */
} sluice__scall_shared;

/* What the calls of one loop share. */
typedef struct sluice__scall_loop {
  sluice__scall_shared *shared;
  sluice__loop *loop;
  sluice__admit_queue *aq;
  sluice__objcache cache; /* freed call objects (loop thread only) */
  sluice__wave calls;     /* live call objects, for trimming (loop thread) */
  sluice__task trim_task; /* a trim after a wave of calls ended */
  int finishing;          /* atomic: finish() calls on this loop's calls between
                             their check of stopped and their post */
  /* The deadlines of the loop's calls, earliest first, and the one timer
   * that serves them all (initialized with the first deadline; loop
   * thread). */
  sluice__heap deadlines;
  uv_timer_t timer;
  uint64_t timer_due; /* the earliest deadline the timer is armed for; 0:
                         not armed */
  enum {
    SLUICE__SCALL_TIMER_NONE,
    SLUICE__SCALL_TIMER_OPEN,
    SLUICE__SCALL_TIMER_CLOSED /* the loop is stopping: no more timing */
  } timer_state;
} sluice__scall_loop;

/* The part of a call its connection owns: all the connection sees. The
 * connection keeps it as its nghttp2 stream's user data. */
typedef struct sluice__sstream {
  sluice__list link;    /* in the connection's calls while the stream is open:
                           the connection links and unlinks it */
  sluice__stream s;     /* the endpoint: connection, id, the send queue's
                           data provider, the receiver (transport/stream.h) */
  uint64_t deadline_ns; /* from grpc-timeout; 0: none */
  /* What the call reads of its request headers, copied by
   * sluice__scall_take_request from the connection's parse (the rest of
   * that, 160 bytes with the inline :path, stays with the connection). */
  sluice_compression enc;        /* the request's encoding, when enc_ok */
  unsigned enc_ok : 1;           /* grpc-encoding absent or implemented */
  unsigned enc_unknown : 1;      /* a grpc-encoding sluice does not implement */
  unsigned accept_gzip : 1;      /* the client takes gzip responses */
  unsigned bad_content_type : 1; /* answered with HTTP 415 */
} sluice__sstream;

/* ---- the server and its loops */

void sluice__scall_shared_init(sluice__scall_shared *sh,
                               const sluice_server_opts *opts,
                               sluice__load *load, sluice__admission *admit);
void sluice__scall_shared_destroy(sluice__scall_shared *sh);
/* A loop's calls: on loop, admitted through aq. */
void sluice__scall_loop_init(sluice__scall_loop *lp, sluice__scall_shared *sh,
                             sluice__loop *loop, sluice__admit_queue *aq);
/* Shutdown is deleting the loops: late finishes are parked from now on. */
void sluice__scall_stop(sluice__scall_shared *sh);
/* Waits until the finishes on lp that did not see stopped have posted. */
void sluice__scall_loop_quiesce(sluice__scall_loop *lp);
/* On the loop thread as it stops, after its connections (and so every
 * call's stream) were closed: closes the deadline timer. */
void sluice__scall_loop_close(sluice__scall_loop *lp);
/* The loop is gone: frees the cached call objects. */
void sluice__scall_loop_destroy(sluice__scall_loop *lp);
/* Loop thread, outside any read or flush (it frees the thread's scratch
 * buffers): gives the memory the loop thread keeps back to the system: the
 * recycled call objects, nghttp2's block lists, the scratch buffers, the
 * large-buffer cache and malloc's free pages (all come back as needed). */
void sluice__scall_loop_trim(sluice__scall_loop *lp);

/* A loop whose live calls fell to half of a peak of at least this many
 * (then to each further half, and to none) trims as for connections
 * (server_conn.h): calls may outlive their connections. */
#define SLUICE__SCALL_TRIM_PEAK 128
/* After every loop thread has exited: frees the calls finished while the
 * loops were being deleted; later finishes free their call directly. */
void sluice__scall_free_orphans(sluice__scall_shared *sh);

/* ---- where a connection's calls come from */

/* What the calls of one connection share about where they came from: the
 * peer's address and verified identity, and the :authority and user-agent
 * of the requests, which are nearly always the same on every stream. A
 * call keeps a reference instead of copies of its own (and instead of a
 * metadata list, when the client sent no other metadata). Immutable once
 * made; the count is atomic, as a call may be freed on a user's thread
 * after shutdown. */
typedef struct sluice__scall_origin sluice__scall_origin;

/* A connection's first origin: peer and identity (may be NULL) copied, no
 * :authority or user-agent yet. NULL when out of memory. */
sluice__scall_origin *sluice__scall_origin_new(const char *peer,
                                               const char *identity);
/* Drops a reference (NULL: nothing). */
void sluice__scall_origin_unref(sluice__scall_origin *o);

/* ---- a call, for its connection */

/* A call for stream stream_id of conn, on lp's loop; NULL when out of
 * memory. The caller links it into its list of calls. origin (the
 * connection's current one) is referenced; pacer is borrowed while the
 * stream is open. */
sluice__sstream *sluice__scall_new(sluice__scall_loop *lp, sluice__conn *conn,
                                   int32_t stream_id,
                                   sluice__scall_origin *origin,
                                   sluice__load_pacer *pacer);
/* The request's header block is complete, as the connection parsed it into
 * rq (header blocks never interleave, RFC 9113 6.10, so a connection parses
 * one at a time): the call copies what it reads later, and takes its
 * metadata from *md (rq's list, the connection's). When that holds nothing
 * but :authority and user-agent, the call keeps them through *origin (the
 * connection's current origin, replaced by a new one when they differ) and
 * *md is emptied for the next request; otherwise the call takes the list
 * and *md is NULL (the connection makes another). Called once, before any
 * other news of the request (the verdict included). */
void sluice__scall_take_request(sluice__sstream *st, const sluice__grpc_req *rq,
                                sluice_metadata **md,
                                sluice__scall_origin **origin);
/* The request headers are complete, valid and routed: set up receiving; a
 * client-streaming or bidi method is dispatched now. */
void sluice__scall_headers_done(sluice__sstream *st, sluice__route *route);
/* The request is complete (END_STREAM): a unary or server-streaming method
 * is dispatched; a streaming one learns of the half-close. */
void sluice__scall_request_done(sluice__sstream *st);
/* Data for the call's stream (consumes the window as messages are
 * delivered). */
void sluice__scall_data(sluice__sstream *st, const uint8_t *data, size_t len);
/* Answers with an error (trailers-only) from the library itself. */
void sluice__scall_fail(sluice__sstream *st, sluice_status_code code,
                        const char *message);
/* The stream closed (or the connection died; h2_error then CANCEL); the
 * connection has unlinked it. */
void sluice__scall_stream_closed(sluice__sstream *st, uint32_t h2_error);

#endif
