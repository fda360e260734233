/* The life of one server call: created with its stream, admitted and
 * dispatched to the handler (unary and server-streaming methods once the
 * request is complete, client-streaming and bidi methods once the headers
 * are), finished exactly once by the handler (from any thread) or answered
 * by the library (bad request, deadline, shed), and freed when the stream,
 * and the handler have both let go. The struct is private to this
 * file: the connection sees only the call's sluice__sstream, admission only
 * its sluice__admit_item. */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/bigbuf.h"
#include "server/server_call.h"
#include "sluice/tls.h"
#include "transport/h2mem.h"
#include "transport/h2session.h"
#include "transport/headers.h"
#include "transport/message.h"
#include "transport/recv.h"
#include "transport/scratch.h"
#include "transport/sendq.h"
#include "wire/compress.h"
#include "wire/metadata_internal.h"
#include "wire/metadata_rules.h"
#include "wire/percent.h"

struct sluice_server_call {
  sluice__task run_task; /* admitted: run the handler (holds its ref) */
  sluice__task finish_task;
  sluice__task kick_task;   /* submit headers / resume data (any thread) */
  sluice__task ready_task;  /* report on_send_ready */
  sluice__task resume_task; /* handlers set or pause changed (any thread) */
  int kick_posted, resume_posted; /* atomic */
  sluice__load_pacer *pacer;      /* its connection's; NULL with conn */
  sluice__scall_loop *lp;
  sluice__route *route;
  sluice__sstream st; /* the connection's part: link, stream endpoint (its
                         connection: NULL once the stream is gone), request
                         headers */
  /* request */
  int msg_compressed; /* the last delivered request message was */
  union {
    ProtobufCMessage *msg; /* the single request, decoded */
    sluice_buf *buf;       /* or, on a raw route, serialized */
  } req;
  int n_msgs;
  int half_closed;     /* the client's END_STREAM arrived */
  int half_close_told; /* on_half_close fired */
  sluice_status_code fail_code;
  const char *fail_reason;
  /* A formatted fail_reason's own copy (keep_text), or NULL: the rare
   * failure does not make every call carry buffers for its text. */
  char *fail_text;
  sluice__scall_origin *origin; /* peer, identity, :authority, user-agent */
  /* The request's metadata: the list the connection filled when the client
   * sent more than :authority and user-agent; else NULL until the handler
   * asks for it (sluice_server_call_metadata makes it from origin, once,
   * from any thread: atomic). */
  sluice_metadata *md;
  /* In the loop's deadline heap while armed (dl_armed): one timer per loop
   * serves every call's deadline, so a call carries 32 bytes for it rather
   * than a uv_timer_t (152), and arming or disarming it is a few pointer
   * moves with no libuv handle to close. */
  sluice__heap_node dl;
  int dl_armed;
  sluice__admit_item adm;   /* admission (admit.c; loop thread) */
  sluice__list orphan_link; /* in lp->shared->orphans */
  uint32_t pushback_ms; /* grpc-retry-pushback-ms in the trailers; 0: none */
  int refs;             /* stream + handler */
  int responded;        /* the final status is decided: nothing more from the
                           handler is sent */
  int headers_sent;     /* atomic: response HEADERS submitted */
  int final_sent;       /* trailers (or Trailers-Only) submitted */
  int md_too_large;     /* the initial metadata went over the client's header
                           list limit: dropped, the call ends RESOURCE_EXHAUSTED */
  int cancelled;        /* atomic: reply will be discarded */
  int finished;         /* atomic: finish was called */
  /* streaming */
  sluice_server_call_handlers h;
  void *h_ud;
  /* sluice_server_call_set_handlers_typed: h_ud points here */
  sluice_server_call_typed_handlers typed;
  int handlers_set;   /* atomic */
  int done_told;      /* on_done fired */
  int handler_status; /* the final status is the handler's (its finish
                         decided it, not the library) */
  int end_cancelled;  /* on_done's cancelled, known once the stream closed */
  int want_paused;    /* atomic */
  int compression;    /* atomic sluice_compression for responses */
  sluice__sendq sendq;
  /* the final status: code/message are loop-side; fin_* are written by
   * finish (any thread) and read by the loop in finish_task */
  sluice_status_code code;
  char *message;
  sluice_status_code fin_code;
  char *fin_message;
  sluice_metadata *initial_md, *trailing_md;
  /* Metadata may be added from any thread until the loop closes a kind
   * (SLUICE__MD_INITIAL when the headers are submitted, SLUICE__MD_TRAILING
   * when the final status is decided, both when the stream is gone); the
   * loop reads a list only once it is closed. The send queue's mutex
   * (md_lock) guards the lists until then and md_closed: one mutex per call
   * rather than a second one of 40 bytes for this. */
  int md_closed;
};
enum { SLUICE__MD_INITIAL = 1, SLUICE__MD_TRAILING = 2 };

/* A raw call's on_message, stored in h.on_message
 * (sluice_server_call_set_raw_handlers): cast back before calling. */
typedef void (*raw_on_message_fn)(sluice_server_call *call, sluice_buf *msg,
                                  void *user_data);

static void fail(sluice_server_call *call, sluice_status_code code,
                 const char *message);
static void disarm_deadline(sluice_server_call *call);
static const sluice__stream_ops stream_ops;
static void on_finish_task(sluice__task *t);
static void on_run_task(sluice__task *t);
static void on_kick_task(sluice__task *t);
static void on_ready_task(sluice__task *t);
static void on_resume_task(sluice__task *t);

static uv_mutex_t *md_lock(sluice_server_call *call) {
  return sluice__sendq_mutex(&call->sendq);
}

static int streams_requests(const sluice_server_call *call) {
  return sluice_call_kind_streams_requests(call->route->method->kind);
}

static int streams_responses(const sluice_server_call *call) {
  return sluice_call_kind_streams_responses(call->route->method->kind);
}

/* ---- admission's ops */

/* Admitted (its deadline is armed): the handler runs from a task on
 * the loop, never from inside nghttp2's callbacks or another call's finish.
 * Posted on the loop thread, the task runs in the prepare phase before the
 * deferred flush: a handler that finishes at once still has its response
 * in the same write. */
static void run(sluice_server_call *call) {
  call->refs++; /* the handler's, released by finish */
  sluice__loop_post(call->lp->loop, &call->run_task);
}

static void on_run_task(sluice__task *t) {
  sluice_server_call *call =
      SLUICE__CONTAINER_OF(t, sluice_server_call, run_task);
  if (call->route->raw) {
    sluice_buf *req = call->req.buf;
    call->req.buf = NULL; /* the handler's now */
    call->route->raw(call, req, call->route->user_data);
    return;
  }
  call->route->dispatch(call, call->req.msg, call->route->handlers,
                        call->route->user_data);
}

/* Answers with an error and grpc-retry-pushback-ms (pushback_ms, 0: none)
 * instead of running the handler. */
static void shed(sluice_server_call *call, sluice_status_code code,
                 const char *message, uint32_t pushback_ms) {
  if (call->responded || !call->st.s.conn)
    return;
  call->pushback_ms = pushback_ms;
  fail(call, code, message);
}

static void on_admitted(sluice__admit_item *it) {
  run(SLUICE__CONTAINER_OF(it, sluice_server_call, adm));
}

static void on_shed(sluice__admit_item *it, sluice_status_code code,
                    const char *message, uint32_t pushback_ms) {
  shed(SLUICE__CONTAINER_OF(it, sluice_server_call, adm), code, message,
       pushback_ms);
}

static const sluice__admit_ops admit_ops = {on_admitted, on_shed};

static sluice_server_call *call_of(sluice__sstream *st) {
  return SLUICE__CONTAINER_OF(st, sluice_server_call, st);
}

/* ---- origins */

struct sluice__scall_origin {
  int refs;               /* atomic */
  const char *identity;   /* NULL: none */
  const char *authority;  /* NULL: none received */
  const char *user_agent; /* NULL: none received */
  size_t authority_len, user_agent_len;
  char peer[]; /* then the strings above, each NUL-terminated */
};

/* One allocation for the origin and its strings. a and u (al, ul bytes)
 * may be NULL: not received. */
static sluice__scall_origin *origin_make(const char *peer, const char *identity,
                                         const char *a, size_t al,
                                         const char *u, size_t ul) {
  size_t pl = strlen(peer) + 1, il = identity ? strlen(identity) + 1 : 0;
  sluice__scall_origin *o =
      sluice__malloc(sizeof *o + pl + il + (a ? al + 1 : 0) + (u ? ul + 1 : 0));
  if (!o)
    return NULL;
  char *p = o->peer;
  memcpy(p, peer, pl);
  p += pl;
  o->identity = o->authority = o->user_agent = NULL;
  o->authority_len = al;
  o->user_agent_len = ul;
  if (identity) {
    memcpy(p, identity, il);
    o->identity = p;
    p += il;
  }
  if (a) {
    memcpy(p, a, al);
    p[al] = '\0';
    o->authority = p;
    p += al + 1;
  }
  if (u) {
    memcpy(p, u, ul);
    p[ul] = '\0';
    o->user_agent = p;
  }
  o->refs = 1;
  return o;
}

sluice__scall_origin *sluice__scall_origin_new(const char *peer,
                                               const char *identity) {
  return origin_make(peer, identity, NULL, 0, NULL, 0);
}

static void origin_ref(sluice__scall_origin *o) {
  __atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
}

void sluice__scall_origin_unref(sluice__scall_origin *o) {
  if (o && __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0)
    free(o);
}

/* Whether the origin's value (have, hl; NULL: none) is entry e's (NULL:
 * none received). */
static int same_value(const char *have, size_t hl, const sluice__md_entry *e) {
  if (!e)
    return have == NULL;
  return have && hl == e->len && memcmp(have, e->value, hl) == 0;
}

void sluice__scall_take_request(sluice__sstream *st, const sluice__grpc_req *rq,
                                sluice_metadata **mdp,
                                sluice__scall_origin **cur) {
  sluice_server_call *call = call_of(st);
  st->enc = rq->enc;
  st->enc_ok = rq->enc_ok != 0;
  st->enc_unknown = rq->enc_unknown != 0;
  st->accept_gzip = rq->accept_gzip != 0;
  st->bad_content_type = rq->bad_content_type != 0;
  sluice_metadata *md = *mdp;
  if (!md)
    return; /* cannot be: the connection made it for this block */
  /* The wire layer appends as received, and pseudo-headers come first. */
  const sluice__md_entry *a = NULL, *u = NULL;
  size_t i = 0;
  if (i < md->count && strcmp(md->entries[i].key, ":authority") == 0)
    a = &md->entries[i++];
  if (i < md->count && strcmp(md->entries[i].key, "user-agent") == 0)
    u = &md->entries[i++];
  int keep_list = i < md->count; /* the client's own metadata */
  sluice__scall_origin *o = *cur;
  if (!keep_list && !(same_value(o->authority, o->authority_len, a) &&
                      same_value(o->user_agent, o->user_agent_len, u))) {
    sluice__scall_origin *n =
        origin_make(o->peer, o->identity, a ? a->value : NULL, a ? a->len : 0,
                    u ? u->value : NULL, u ? u->len : 0);
    if (n) {
      sluice__scall_origin_unref(o);
      *cur = o = n;
    } else {
      keep_list = 1; /* the list has the values already */
    }
  }
  if (keep_list) {
    call->md = md;
    *mdp = NULL;
    return;
  }
  if (call->origin != o) {
    origin_ref(o);
    sluice__scall_origin_unref(call->origin);
    call->origin = o;
  }
  sluice__metadata_clear(md);
}

sluice__sstream *sluice__scall_new(sluice__scall_loop *lp, sluice__conn *conn,
                                   int32_t stream_id,
                                   sluice__scall_origin *origin,
                                   sluice__load_pacer *pacer) {
  /* On the loop thread: recycled from the loop's cache (see objcache.h). */
  sluice_server_call *call = sluice__objcache_get(&lp->cache);
  if (!call)
    return NULL;
  if (sluice__sendq_init(&call->sendq, lp->shared->opts->send_buffer) != 0) {
    sluice__objcache_put(&lp->cache, call);
    return NULL;
  }
  call->st.s.sendq = &call->sendq;
  call->st.s.ops = &stream_ops;
  sluice__stream_attach(&call->st.s, conn, stream_id);
  /* No request facts before take_request: identity, gzip taken. */
  call->st.enc = SLUICE_COMPRESS_NONE;
  call->st.enc_ok = 1;
  call->st.accept_gzip = 1;
  origin_ref(origin);
  call->origin = origin;
  call->pacer = pacer;
  call->lp = lp;
  sluice__wave_up(&lp->calls);
  call->refs = 1; /* the stream's */
  call->finish_task.fn = on_finish_task;
  call->run_task.fn = on_run_task;
  call->kick_task.fn = on_kick_task;
  call->ready_task.fn = on_ready_task;
  call->resume_task.fn = on_resume_task;
  sluice__admit_item_init(&call->adm, &admit_ops);
  sluice__list_init(&call->st.link);
  return &call->st;
}

/* on_loop 0: the loops are gone (finish after shutdown), nothing queued. */
static void scall_free(sluice_server_call *call, int on_loop) {
  sluice__loop *l = call->lp->loop;
  if (on_loop) {
    disarm_deadline(call); /* already, when the stream closed */
    sluice__loop_cancel(l, &call->kick_task);
    sluice__loop_cancel(l, &call->ready_task);
    sluice__loop_cancel(l, &call->resume_task);
  }
  sluice__scall_origin_unref(call->origin);
  free(call->message);
  free(call->fin_message);
  free(call->fail_text);
  sluice__sendq_destroy(&call->sendq);
  sluice_metadata_del(call->md);
  sluice_metadata_del(call->initial_md);
  sluice_metadata_del(call->trailing_md);
  sluice__recv_reset(&call->st.s.recv);
  if (call->route && call->route->raw)
    sluice_buf_free(call->req.buf);
  else if (call->req.msg)
    protobuf_c_message_free_unpacked(call->req.msg,
                                     sluice__bigbuf_pb_allocator());
  if (!on_loop) {
    free(call);
    return;
  }
  sluice__scall_loop *lp = call->lp;
  sluice__objcache_put(&lp->cache, call);
  /* Held calls can outlive their connections (a handler that replies
   * late): the trim after the connections' wave came too early for them.
   * Posted, not run here: a read or a flush may be using the scratch
   * buffers the trim frees. */
  if (sluice__wave_down(&lp->calls, SLUICE__SCALL_TRIM_PEAK))
    sluice__loop_post_local(l, &lp->trim_task);
}

void sluice__scall_free_orphans(sluice__scall_shared *sh) {
  uv_mutex_lock(&sh->mu);
  sh->joined = 1;
  uv_mutex_unlock(&sh->mu);
  /* joined is set: nobody adds to the list any more. */
  SLUICE__LIST_FOREACH_SAFE(n, &sh->orphans) {
    sluice_server_call *call =
        SLUICE__CONTAINER_OF(n, sluice_server_call, orphan_link);
    sluice__list_remove(n);
    sluice__admit_release(call->lp->aq, &call->adm, 0);
    scall_free(call, 0);
  }
}

void sluice__scall_shared_init(sluice__scall_shared *sh,
                               const sluice_server_opts *opts,
                               sluice__load *load, sluice__admission *admit) {
  memset(sh, 0, sizeof *sh);
  sh->opts = opts;
  sh->load = load;
  sh->admit = admit;
  uv_mutex_init(&sh->mu);
  sluice__list_init(&sh->orphans);
}

void sluice__scall_shared_destroy(sluice__scall_shared *sh) {
  uv_mutex_destroy(&sh->mu);
}

static void on_trim_task(sluice__task *t) {
  sluice__scall_loop_trim(
      SLUICE__CONTAINER_OF(t, sluice__scall_loop, trim_task));
}

void sluice__scall_loop_init(sluice__scall_loop *lp, sluice__scall_shared *sh,
                             sluice__loop *loop, sluice__admit_queue *aq) {
  lp->shared = sh;
  lp->loop = loop;
  lp->aq = aq;
  lp->finishing = 0;
  lp->calls = (sluice__wave){0, 0, 0};
  lp->trim_task = (sluice__task){on_trim_task, NULL, 0};
  sluice__heap_init(&lp->deadlines);
  lp->timer_state = SLUICE__SCALL_TIMER_NONE;
  lp->timer_due = 0;
  sluice__objcache_init(&lp->cache, sizeof(sluice_server_call), 128);
}

void sluice__scall_stop(sluice__scall_shared *sh) {
  __atomic_store_n(&sh->stopped, 1, __ATOMIC_SEQ_CST);
}

void sluice__scall_loop_quiesce(sluice__scall_loop *lp) {
  while (__atomic_load_n(&lp->finishing, __ATOMIC_SEQ_CST) != 0)
    sched_yield();
}

void sluice__scall_loop_close(sluice__scall_loop *lp) {
  if (lp->timer_state == SLUICE__SCALL_TIMER_OPEN)
    uv_close((uv_handle_t *)&lp->timer, NULL);
  lp->timer_state = SLUICE__SCALL_TIMER_CLOSED;
}

void sluice__scall_loop_destroy(sluice__scall_loop *lp) {
  /* A trim task still queued went with the loop (tasks are not freed). */
  sluice__objcache_drain(&lp->cache);
}

void sluice__scall_loop_trim(sluice__scall_loop *lp) {
  sluice__objcache_drain(&lp->cache);
  sluice__h2mem_thread_release();
  sluice__scratch_thread_release();
  sluice__mem_trim();
}

static void unref(sluice_server_call *call) {
  if (--call->refs == 0)
    scall_free(call, 1);
}

/* ---- deadlines: one heap and one timer per loop */

static void on_deadlines(uv_timer_t *t);

/* Arms the loop's timer for its earliest deadline, unless it is armed for
 * that time already or the loop is closing (its calls are being ended). */
static void arm_deadlines(sluice__scall_loop *lp, uint64_t now) {
  sluice__heap_node *first = sluice__heap_min(&lp->deadlines);
  if (!first || lp->timer_state == SLUICE__SCALL_TIMER_CLOSED ||
      (lp->timer_due && lp->timer_due <= first->key))
    return;
  if (lp->timer_state == SLUICE__SCALL_TIMER_NONE) {
    uv_timer_init(sluice__loop_uv(lp->loop), &lp->timer);
    lp->timer.data = lp;
    lp->timer_state = SLUICE__SCALL_TIMER_OPEN;
  }
  lp->timer_due = first->key;
  sluice__timer_start_deadline(&lp->timer, first->key, now, on_deadlines);
}

/* The call leaves the heap: its status is decided or its stream is gone.
 * The timer is not re-armed when it was the earliest: it fires once for
 * nothing at most, and finishing a call stays a few pointer moves. */
static void disarm_deadline(sluice_server_call *call) {
  if (call->dl_armed) {
    call->dl_armed = 0;
    sluice__heap_remove(&call->lp->deadlines, &call->dl);
  }
}

/* ---- responses */

/* Loop: no metadata of these kinds is added from now on (it is being sent,
 * or the call is over); the lists are read without the lock after this. */
static void close_md(sluice_server_call *call, int kinds) {
  /* Only the loop writes md_closed, so it reads it without the lock: the
   * stream's end closes both kinds, usually closed already. */
  if ((call->md_closed & kinds) == kinds)
    return;
  uv_mutex_lock(md_lock(call));
  call->md_closed |= kinds;
  uv_mutex_unlock(md_lock(call));
}

/* What the trailers borrow until they are submitted. */
typedef struct status_bufs {
  char code[16];
  char *msg; /* percent-encoded grpc-message, freed by the caller */
  char pushback[16];
  char load[SLUICE__LOAD_REPORT_B64];
} status_bufs;

/* The load report goes in every response's trailers, or at most once per
 * interval on a connection (and always with a shed call's pushback). */
static int want_load_report(sluice_server_call *call) {
  return sluice__load_due(call->lp->shared->load,
                          call->pushback_ms || !call->st.s.conn ? NULL
                                                                : call->pacer);
}

/* Whether h is over the client's SETTINGS_MAX_HEADER_LIST_SIZE. */
static int over_peer_limit(const sluice_server_call *call,
                           const sluice__nvs *h) {
  if (!call->st.s.conn || !call->st.s.conn->session)
    return 0;
  size_t n = 0;
  for (size_t i = 0; i < h->n; i++)
    n += sluice__h2_field_size(h->nv[i].namelen, h->nv[i].valuelen);
  return n > sluice__h2_peer_max_header_list(call->st.s.conn->session);
}

#define MD_TOO_LARGE_TEXT                                                      \
  "response metadata too large: over the client's "                            \
  "SETTINGS_MAX_HEADER_LIST_SIZE (dropped)"

/* add_status's body: code/message, and the trailing metadata when
 * with_md. */
static int add_status_as(sluice__nvs *h, sluice_server_call *call,
                         status_bufs *b, sluice_status_code code,
                         const char *message, int with_md) {
  b->msg = NULL;
  if (code == SLUICE_STATUS_OK) /* the common case, without printf */
    memcpy(b->code, "0", 2);
  else
    snprintf(b->code, sizeof b->code, "%d", (int)code);
  sluice__nvs_add_str(h, "grpc-status", b->code);
  if (code != SLUICE_STATUS_OK && message && *message) {
    size_t ml = strlen(message);
    b->msg = sluice__malloc(ml * 3 + 1);
    if (!b->msg)
      return -1;
    size_t el = sluice__percent_encode(message, ml, b->msg);
    sluice__nvs_add(h, "grpc-message", 12, b->msg, el);
  }
  if (with_md)
    sluice__nvs_add_md(h, call->trailing_md);
  if (call->pushback_ms) {
    snprintf(b->pushback, sizeof b->pushback, "%u", call->pushback_ms);
    sluice__nvs_add_str(h, "grpc-retry-pushback-ms", b->pushback);
  }
  size_t ll =
      want_load_report(call)
          ? sluice__load_report(
                call->lp->shared->load,
                sluice__admit_in_flight(call->lp->shared->admit), b->load)
          : 0;
  if (ll) {
    sluice__nvs_add(h, "endpoint-load-metrics-bin", 25, b->load, ll);
    /* A new value every time: keep it out of the HPACK dynamic table. */
    if (!sluice__nvs_failed(h))
      h->nv[h->n - 1].flags |= NGHTTP2_NV_FLAG_NO_INDEX;
  }
  return sluice__nvs_failed(h) ? -1 : 0;
}

/* Trailers carrying call->code/message, the trailing metadata,
 * grpc-retry-pushback-ms of a shed call and the load report. The header
 * list borrows b: keep it until submitted, then free b->msg. Metadata over
 * the client's header list limit (RFC 9113 10.5.1) is dropped and the call
 * ends RESOURCE_EXHAUSTED instead. */
static int add_status(sluice__nvs *h, sluice_server_call *call,
                      status_bufs *b) {
  size_t base = h->n;
  if (!call->md_too_large) {
    if (add_status_as(h, call, b, call->code, call->message, 1) != 0)
      return -1;
    /* Only what the application gave can be large (the library's own
     * fields are a few hundred bytes): the common call skips the sum. */
    int user =
        sluice_metadata_count(call->trailing_md) ||
        (call->code != SLUICE_STATUS_OK && call->message && *call->message);
    if (!user || !over_peer_limit(call, h))
      return 0;
    free(b->msg);
    h->n = base; /* what add_status_as added; its buffers stay owned */
  }
  return add_status_as(h, call, b, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                       MD_TOO_LARGE_TEXT, 0);
}

/* The data provider's body (transport/stream.h): the send queue, then
 * the status in the trailers. */
static ssize_t read_response(sluice__stream *s, size_t len, uint32_t *flags) {
  sluice_server_call *call = SLUICE__CONTAINER_OF(s, sluice_server_call, st.s);
  if (call->final_sent) /* the library ended the stream (end_now) */
    return NGHTTP2_ERR_DEFERRED;
  ssize_t n = sluice__stream_read(s, len, flags);
  if (*flags & NGHTTP2_DATA_FLAG_EOF) {
    /* The queue closes when the final status is decided (finish or a
     * library failure); the status goes in the trailers. */
    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    sluice__nvs t;
    sluice__nvs_init(&t);
    status_bufs b;
    int rv = add_status(&t, call, &b) != 0
                 ? -1
                 : nghttp2_submit_trailer(s->conn->session, s->id, t.nv, t.n);
    sluice__nvs_free(&t);
    free(b.msg);
    if (rv != 0)
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    call->final_sent = 1;
  }
  return n;
}

/* A DATA frame took n bytes of the responses. */
static void response_sent(sluice__stream *s, size_t n, int ready) {
  (void)n;
  sluice_server_call *call = SLUICE__CONTAINER_OF(s, sluice_server_call, st.s);
  if (ready)
    sluice__loop_post(call->lp->loop, &call->ready_task);
}

static const sluice__stream_ops stream_ops = {response_sent, read_response, 0};

static int response_compressed(const sluice_server_call *call) {
  return __atomic_load_n(&call->compression, __ATOMIC_ACQUIRE) ==
             SLUICE_COMPRESS_GZIP &&
         call->st.accept_gzip;
}

/* Submits the response HEADERS with a data provider on the send queue, or
 * a Trailers-Only answer when the status is decided and nothing was sent. */
static void submit_headers(sluice_server_call *call, int http_status) {
  sluice__conn *conn = call->st.s.conn;
  sluice__nvs h;
  sluice__nvs_init(&h);
  char st[16];
  status_bufs b;
  b.msg = NULL;
  if (http_status == 200)
    memcpy(st, "200", 4);
  else
    snprintf(st, sizeof st, "%d", http_status);
  sluice__nvs_add_str(&h, ":status", st);
  sluice__nvs_add(&h, "content-type", 12, "application/grpc", 16);
  sluice__nvs_add_str(&h, "grpc-accept-encoding", SLUICE__ACCEPT_ENCODING);
  if (response_compressed(call))
    sluice__nvs_add_str(&h, "grpc-encoding", "gzip");
  close_md(call, SLUICE__MD_INITIAL);
  size_t base = h.n;
  sluice__nvs_add_md(&h, call->initial_md);
  if (h.n > base && over_peer_limit(call, &h)) {
    h.n = base; /* dropped; the trailers say so */
    call->md_too_large = 1;
  }
  int rv;
  int trailers_only = call->responded &&
                      sluice__sendq_queued(&call->sendq) == 0 &&
                      (call->code != SLUICE_STATUS_OK ||
                       sluice__sendq_pushed(&call->sendq) == 0);
  __atomic_store_n(&call->headers_sent, 1, __ATOMIC_RELEASE);
  if (!trailers_only) {
    nghttp2_data_provider dp = sluice__stream_provider(&call->st.s);
    rv = sluice__nvs_failed(&h)
             ? -1
             : nghttp2_submit_response(conn->session, call->st.s.id, h.nv, h.n,
                                       &dp);
  } else {
    /* Trailers-Only: one HEADERS frame with END_STREAM. */
    rv = add_status(&h, call, &b) != 0
             ? -1
             : nghttp2_submit_response(conn->session, call->st.s.id, h.nv, h.n,
                                       NULL);
    call->final_sent = rv == 0;
  }
  sluice__nvs_free(&h);
  free(b.msg);
  if (rv != 0)
    sluice__stream_reset(&call->st.s, NGHTTP2_INTERNAL_ERROR);
  sluice__conn_want_write(conn);
}

/* Loop: pushes out what the handler queued (headers first). */
static void push_out(sluice_server_call *call) {
  if (!call->st.s.conn)
    return;
  if (!__atomic_load_n(&call->headers_sent, __ATOMIC_ACQUIRE)) {
    /* As sluice__grpc_req_http_status says. */
    submit_headers(call, call->st.bad_content_type ? 415 : 200);
    return;
  }
  sluice__stream_resume_send(&call->st.s);
}

/* A status the library decided, once the response headers are out: the
 * trailers go now rather than from the data provider, which flow control
 * may never run again (a client that reads nothing more); the messages
 * were dropped and the trailers, a HEADERS frame, need no window. */
static void end_now(sluice_server_call *call) {
  sluice__conn *conn = call->st.s.conn;
  sluice__nvs t;
  sluice__nvs_init(&t);
  status_bufs b;
  int rv =
      add_status(&t, call, &b) != 0
          ? -1
          : nghttp2_submit_trailer(conn->session, call->st.s.id, t.nv, t.n);
  sluice__nvs_free(&t);
  free(b.msg);
  call->final_sent = rv == 0;
  if (rv != 0)
    sluice__stream_reset(&call->st.s, NGHTTP2_INTERNAL_ERROR);
  sluice__conn_want_write(conn);
}

/* Decides the final status on the loop: code/message (copied); queued
 * messages still go out before it unless drop is set. */
static void decide(sluice_server_call *call, sluice_status_code code,
                   const char *message, int drop) {
  close_md(call, SLUICE__MD_TRAILING);
  call->responded = 1;
  __atomic_store_n(&call->cancelled, 1, __ATOMIC_RELAXED);
  sluice__admit_dequeue(call->lp->aq, &call->adm);
  disarm_deadline(call);
  call->code = code;
  free(call->message);
  call->message = message && *message ? sluice__strdup(message) : NULL;
  int deferred;
  if (drop)
    sluice__sendq_abort(&call->sendq);
  else
    sluice__sendq_close(&call->sendq, &deferred);
  if (drop && call->st.s.conn && !call->final_sent &&
      __atomic_load_n(&call->headers_sent, __ATOMIC_ACQUIRE))
    end_now(call);
  else
    push_out(call);
}

static void fail(sluice_server_call *call, sluice_status_code code,
                 const char *message) {
  if (call->responded || !call->st.s.conn)
    return;
  decide(call, code, message, 1);
}

void sluice__scall_fail(sluice__sstream *st, sluice_status_code code,
                        const char *message) {
  fail(call_of(st), code, message);
}

/* ---- receiving */

/* A failure text formatted on the stack, kept for as long as the call
 * (fail_reason is read again when the request ends); a fixed text when
 * there is no memory for the copy. */
static const char *keep_text(sluice_server_call *call, const char *text) {
  free(call->fail_text);
  call->fail_text = sluice__strdup(text);
  return call->fail_text ? call->fail_text
                         : "request failed (out of memory for its reason)";
}

static void tell_done(sluice_server_call *call, int cancelled);

static void maybe_tell_half_close(sluice_server_call *call) {
  if (call->half_closed && !call->half_close_told && call->handlers_set &&
      !sluice__recv_holding(&call->st.s.recv) && !call->responded &&
      streams_requests(call)) {
    call->half_close_told = 1;
    if (call->h.on_half_close)
      call->h.on_half_close(call, call->h_ud);
  }
}

/* One request message as the handler takes it: decoded into *msg on a
 * protobuf route, handed over as *buf on a raw route (in the block it was
 * reassembled in when there is one). */
static sluice_status_code take_message(sluice_server_call *call, int compressed,
                                       const uint8_t *data, size_t len,
                                       ProtobufCMessage **msg, sluice_buf **buf,
                                       char *text, size_t tlen) {
  sluice__recv *r = &call->st.s.recv;
  if (call->route->raw)
    return sluice__msg_to_buf(compressed, call->st.enc_ok, call->st.enc, data,
                              len, r->deframer.max_size,
                              sluice__recv_take(r, data), buf, text, tlen);
  return sluice__msg_unpack(call->route->method->request, compressed,
                            call->st.enc_ok, call->st.enc, data, len,
                            r->deframer.max_size, msg, text, tlen);
}

static int deliver(void *ud, int compressed, const uint8_t *data, size_t len) {
  sluice_server_call *call = ud;
  if (call->responded)
    return 1;
  if (!streams_requests(call) && call->n_msgs >= 1) {
    call->fail_code = SLUICE_STATUS_UNIMPLEMENTED;
    call->fail_reason = "more than one request message for a method that "
                        "takes one";
    return 1;
  }
  if (compressed && call->st.enc_unknown) {
    call->fail_code = SLUICE_STATUS_UNIMPLEMENTED;
    call->fail_reason = "grpc-encoding not supported (identity, gzip are)";
    return 1;
  }
  ProtobufCMessage *msg = NULL;
  sluice_buf *buf = NULL;
  char text[160];
  sluice_status_code code =
      take_message(call, compressed, data, len, &msg, &buf, text, sizeof text);
  if (code != SLUICE_STATUS_OK) {
    call->fail_code = code;
    call->fail_reason = keep_text(call, text);
    return 1;
  }
  call->n_msgs++;
  call->msg_compressed = compressed;
  if (!streams_requests(call)) {
    if (buf)
      call->req.buf = buf;
    else
      call->req.msg = msg;
    return 0;
  }
  if (buf && call->h.on_message)
    ((raw_on_message_fn)call->h.on_message)(call, buf, call->h_ud);
  else if (buf)
    sluice_buf_free(buf);
  if (msg && call->h.on_message)
    call->h.on_message(call, msg, call->h_ud);
  if (msg)
    protobuf_c_message_free_unpacked(msg, sluice__bigbuf_pb_allocator());
  return call->responded ? 1 : 0;
}

static uint32_t max_request(const sluice_server_call *call) {
  uint32_t m = call->route->method->max_request_size;
  uint32_t s = call->lp->shared->opts->max_request_size;
  return m && m < s ? m : s;
}

static void fail_from_recv(sluice_server_call *call, sluice_status_code code,
                           const char *reason) {
  if (call->fail_code == SLUICE_STATUS_OK) {
    call->fail_code = code;
    call->fail_reason = reason;
  }
  fail(call, call->fail_code, call->fail_reason);
}

void sluice__scall_data(sluice__sstream *st, const uint8_t *data, size_t len) {
  sluice_server_call *call = call_of(st);
  if (call->responded || !call->route) {
    nghttp2_session_consume(st->s.conn->session, st->s.id, len);
    return;
  }
  const char *reason;
  char text[80]; /* the receiver's "larger than max" text */
  sluice_status_code code =
      sluice__stream_data_in(&st->s, data, len, text, sizeof text, &reason);
  if (code != SLUICE_STATUS_OK && !call->responded)
    fail_from_recv(call, code, reason == text ? keep_text(call, text) : reason);
}

/* ---- deadline and dispatch */

static void on_deadline(sluice_server_call *call) {
  if (call->responded || !call->st.s.conn)
    return;
  if (sluice__admit_queued(&call->adm)) {
    char msg[96];
    uint64_t now = sluice_now_ns();
    snprintf(msg, sizeof msg,
             "deadline exceeded while queued on the server (%llu ms)",
             (unsigned long long)(now > call->adm.ready_ns
                                      ? (now - call->adm.ready_ns) / 1000000u
                                      : 0));
    fail(call, SLUICE_STATUS_DEADLINE_EXCEEDED, msg);
    return;
  }
  /* The stream can end with a status rather than a bare RST_STREAM; the
   * handler's reply is dropped. */
  fail(call, SLUICE_STATUS_DEADLINE_EXCEEDED,
       "deadline exceeded while the server handled the call");
}

/* Every call whose deadline has passed leaves the heap and fails, each
 * before the next is looked at (failing one may end others). libuv times
 * timers from the loop's cached clock, so the timer may fire a little
 * early: what is not due yet re-arms it. */
static void on_deadlines(uv_timer_t *t) {
  sluice__scall_loop *lp = t->data;
  lp->timer_due = 0;
  uint64_t now = sluice_now_ns();
  sluice__heap_node *n;
  while ((n = sluice__heap_min(&lp->deadlines)) && n->key <= now) {
    sluice_server_call *call = SLUICE__CONTAINER_OF(n, sluice_server_call, dl);
    disarm_deadline(call);
    on_deadline(call);
  }
  uv_update_time(t->loop);
  arm_deadlines(lp, now);
}

static void dispatch(sluice_server_call *call) {
  if (call->st.deadline_ns) {
    uint64_t now = sluice_now_ns();
    if (now >= call->st.deadline_ns) {
      fail(call, SLUICE_STATUS_DEADLINE_EXCEEDED,
           "deadline exceeded before the handler ran");
      return;
    }
    call->dl.key = call->st.deadline_ns;
    sluice__heap_insert(&call->lp->deadlines, &call->dl);
    call->dl_armed = 1;
    arm_deadlines(call->lp, now);
  }
  /* Health calls skip admission (sluice_server_opts_set_health_bypass):
   * no slot is taken, so none is given back. */
  if (call->route->bypass) {
    run(call);
    return;
  }
  /* Now, later (queued behind a concurrency limit) or never (shed). */
  call->adm.limit = &call->route->limit;
  call->adm.deadline_ns = call->st.deadline_ns;
  sluice__admit_refusal why;
  switch (sluice__admit(call->lp->aq, &call->adm, &why)) {
  case SLUICE__ADMIT_RUN:
    run(call);
    break;
  case SLUICE__ADMIT_REFUSED:
    shed(call, why.code, why.message, why.pushback_ms);
    break;
  case SLUICE__ADMIT_QUEUED: /* the queue tells through admit_ops */
    break;
  }
}

void sluice__scall_headers_done(sluice__sstream *st, sluice__route *route) {
  sluice_server_call *call = call_of(st);
  call->route = route;
  /* Requests of streaming methods wait (held) until the handler registers
   * its callbacks. */
  sluice__recv_init(&call->st.s.recv, max_request(call), deliver, call,
                    streams_requests(call));
  if (streams_responses(call))
    sluice__stream_set_incremental(&call->st.s);
  if (streams_requests(call))
    dispatch(call);
}

void sluice__scall_request_done(sluice__sstream *st) {
  sluice_server_call *call = call_of(st);
  if (call->responded || !call->route)
    return;
  if (call->fail_code != SLUICE_STATUS_OK) {
    fail(call, call->fail_code, call->fail_reason);
    return;
  }
  if (sluice__deframer_partial(&call->st.s.recv.deframer)) {
    fail(call, SLUICE_STATUS_INTERNAL,
         "request ended in the middle of a message");
    return;
  }
  if (streams_requests(call)) {
    call->half_closed = 1;
    maybe_tell_half_close(call);
    return;
  }
  if (call->n_msgs != 1) {
    fail(call, SLUICE_STATUS_UNIMPLEMENTED,
         "expected exactly one request message, got none");
    return;
  }
  dispatch(call);
}

static void tell_done(sluice_server_call *call, int cancelled) {
  if (call->done_told || !call->handlers_set)
    return;
  call->done_told = 1;
  if (call->h.on_done)
    call->h.on_done(call, cancelled, call->h_ud);
}

void sluice__scall_stream_closed(sluice__sstream *st, uint32_t h2_error) {
  sluice_server_call *call = call_of(st);
  sluice__stream_detach(&call->st.s); /* unconsumed bytes, conn = NULL */
  call->pacer = NULL;
  sluice__admit_dequeue(call->lp->aq, &call->adm);
  /* One rule for every kind of call: cancelled 0 only when the handler
   * finished the call and its status went out on a cleanly closed stream.
   * A status the library decided (the deadline passed, a bad request,
   * shutdown) counts as cancelled, like a client's reset or a dead
   * connection: the handler's work was cut short either way. */
  int cancelled = !(call->handler_status && call->final_sent &&
                    h2_error == NGHTTP2_NO_ERROR);
  call->end_cancelled = cancelled;
  close_md(call, SLUICE__MD_INITIAL | SLUICE__MD_TRAILING);
  __atomic_store_n(&call->cancelled, 1, __ATOMIC_RELAXED);
  call->responded = 1;
  sluice__sendq_abort(&call->sendq); /* later sends: SLUICE_ERR_STATE */
  disarm_deadline(call);
  call->refs++; /* on_done may run the handler's finish */
  tell_done(call, cancelled);
  unref(call);
  unref(call); /* the stream's */
}

/* ---- tasks posted from any thread */

static void on_kick_task(sluice__task *t) {
  sluice_server_call *call =
      SLUICE__CONTAINER_OF(t, sluice_server_call, kick_task);
  sluice__loop_posted_clear(&call->kick_posted);
  if (!call->responded)
    push_out(call);
}

static void kick(sluice_server_call *call) {
  sluice__loop_post_once(call->lp->loop, &call->kick_task, &call->kick_posted);
}

static void on_ready_task(sluice__task *t) {
  sluice_server_call *call =
      SLUICE__CONTAINER_OF(t, sluice_server_call, ready_task);
  if (!call->responded && call->handlers_set && call->h.on_send_ready)
    call->h.on_send_ready(call, call->h_ud);
}

static void on_resume_task(sluice__task *t) {
  sluice_server_call *call =
      SLUICE__CONTAINER_OF(t, sluice_server_call, resume_task);
  sluice__loop_posted_clear(&call->resume_posted);
  if (!call->handlers_set) {
    /* handlers_set is published before the post, so this is a pause
     * change before set_handlers; stay held. */
    return;
  }
  if (!call->st.s.conn) { /* the stream ended before the handler registered */
    tell_done(call, call->end_cancelled);
    return;
  }
  call->st.s.recv.paused =
      __atomic_load_n(&call->want_paused, __ATOMIC_ACQUIRE);
  if (call->responded || call->st.s.recv.paused)
    return;
  if (sluice__stream_drain(&call->st.s) != 0) {
    if (!call->responded)
      fail_from_recv(call,
                     call->fail_code ? call->fail_code : SLUICE_STATUS_INTERNAL,
                     call->fail_reason ? call->fail_reason : "");
    return;
  }
  maybe_tell_half_close(call);
}

static void post_resume(sluice_server_call *call) {
  sluice__loop_post_once(call->lp->loop, &call->resume_task,
                         &call->resume_posted);
}

/* ---- finishing, from any thread */

static void on_finish_task(sluice__task *t) {
  sluice_server_call *call =
      SLUICE__CONTAINER_OF(t, sluice_server_call, finish_task);
  /* The slot goes to a waiting call first; then this call's status. */
  sluice__admit_release(call->lp->aq, &call->adm, 1);
  if (call->st.s.conn && !call->responded) {
    call->handler_status = 1;
    decide(call, call->fin_code, call->fin_message, 0);
  }
  unref(call);
}

static uint32_t max_response(const sluice_server_call *call) {
  uint32_t max = call->lp->shared->opts->max_response_size;
  uint32_t m = call->route->method->max_response_size;
  return m && m < max ? m : max;
}

static sluice_compression response_compression(const sluice_server_call *call,
                                               unsigned flags) {
  return response_compressed(call) && !(flags & SLUICE_SEND_NO_COMPRESS)
             ? SLUICE_COMPRESS_GZIP
             : SLUICE_COMPRESS_NONE;
}

/* Queues one framed response [prefix | body] (malloc'd; the queue's on 0).
 * force skips the queue bound (the last message handed to finish). */
static int push_response(sluice_server_call *call, uint8_t *buf, size_t len,
                         int force) {
  int deferred;
  int rv = sluice__sendq_push(&call->sendq, buf, len, force, &deferred);
  if (rv != 0)
    return rv;
  /* finish (force) pushes out from its own task. */
  if (!force &&
      (deferred || !__atomic_load_n(&call->headers_sent, __ATOMIC_ACQUIRE)))
    kick(call);
  return 0;
}

/* Serializes msg on the caller's thread and queues it. */
static int queue_response(sluice_server_call *call, const ProtobufCMessage *msg,
                          unsigned flags, int force, size_t *size) {
  uint8_t *buf;
  size_t len;
  int rv = sluice__msg_pack(msg, response_compression(call, flags),
                            max_response(call), &buf, &len, size);
  if (rv != 0)
    return rv;
  rv = push_response(call, buf, len, force);
  if (rv != 0)
    free(buf);
  return rv;
}

/* As queue_response for a buffer handed over (on 0 only): its own block
 * goes into the queue, no copy unless compressed. */
static int queue_response_buf(sluice_server_call *call, sluice_buf *b,
                              unsigned flags, int force, size_t *size) {
  uint8_t *buf;
  size_t len;
  int rv = sluice__msg_frame_buf(b, response_compression(call, flags),
                                 max_response(call), &buf, &len, size);
  if (rv != 0)
    return rv;
  rv = push_response(call, buf, len, force);
  if (rv != 0)
    sluice__msg_frame_drop(b, buf);
  else
    sluice__msg_framed(b, buf);
  return rv;
}

/* finish and finish_buf, arguments checked: the last message is resp or
 * rbuf (the library's, whatever happens), or neither. */
static int finish(sluice_server_call *call, sluice_status_code code,
                  const char *message, const ProtobufCMessage *resp,
                  sluice_buf *rbuf) {
  if (__atomic_exchange_n(&call->finished, 1, __ATOMIC_ACQ_REL))
    return SLUICE_ERR_STATE;
  if ((unsigned)code > SLUICE_STATUS_UNAUTHENTICATED)
    code = SLUICE_STATUS_UNKNOWN;
  call->fin_code = code;
  char buf[160];
  if (code == SLUICE_STATUS_OK && (resp || rbuf) &&
      !__atomic_load_n(&call->cancelled, __ATOMIC_RELAXED)) {
    size_t size = 0;
    int rv = resp ? queue_response(call, resp, 0, 1, &size)
                  : queue_response_buf(call, rbuf, 0, 1, &size);
    if (rv == 0)
      rbuf = NULL; /* the queue's */
    if (rv == SLUICE_ERR_TOO_LARGE) {
      snprintf(buf, sizeof buf,
               "response message larger than max (%zu vs. %" PRIu32 ")", size,
               max_response(call));
      call->fin_code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      message = buf;
    } else if (rv == SLUICE_ERR_NOMEM) {
      call->fin_code = SLUICE_STATUS_RESOURCE_EXHAUSTED;
      message = "out of memory for the response";
    }
  }
  sluice_buf_free(rbuf); /* not sent: cancelled, failed, or not OK */
  call->fin_message = code != SLUICE_STATUS_OK || call->fin_code != code
                          ? sluice__strdup(message ? message : "")
                          : NULL;
  sluice__scall_shared *sh = call->lp->shared;
  sluice__scall_loop *lp = call->lp;
  /* The common case takes no lock shared between loops: announce this
   * finish on the call's loop, then check stopped. Shutdown sets stopped,
   * then waits for every loop's count to drop to 0 before deleting the
   * loops (both sides sequentially consistent: either this sees stopped,
   * or shutdown sees the count and waits for the post). */
  __atomic_add_fetch(&lp->finishing, 1, __ATOMIC_SEQ_CST);
  if (!__atomic_load_n(&sh->stopped, __ATOMIC_SEQ_CST)) {
    sluice__loop_post(lp->loop, &call->finish_task);
    __atomic_sub_fetch(&lp->finishing, 1, __ATOMIC_SEQ_CST);
    return 0;
  }
  __atomic_sub_fetch(&lp->finishing, 1, __ATOMIC_SEQ_CST);
  uv_mutex_lock(&sh->mu);
  if (sh->joined) {
    /* The loops are gone and the stream with them: nothing to send. */
    uv_mutex_unlock(&sh->mu);
    sluice__admit_release(lp->aq, &call->adm, 0);
    scall_free(call, 0);
    return 0;
  }
  /* The loops are being torn down and may still touch the call (closing
   * its stream): it is freed once they have exited
   * (sluice__scall_free_orphans). */
  sluice__list_push(&sh->orphans, &call->orphan_link);
  uv_mutex_unlock(&sh->mu);
  return 0;
}

int sluice_server_call_finish(sluice_server_call *call, sluice_status_code code,
                              const char *message,
                              const ProtobufCMessage *resp) {
  if (!call || !call->route)
    return SLUICE_ERR_INVALID_ARG;
  const sluice_method_desc *m = call->route->method;
  if (resp && (!m->response || resp->descriptor != m->response))
    return SLUICE_ERR_INVALID_ARG;
  if (code == SLUICE_STATUS_OK && !resp && !streams_responses(call))
    return SLUICE_ERR_INVALID_ARG;
  return finish(call, code, message, resp, NULL);
}

int sluice_server_call_finish_buf(sluice_server_call *call,
                                  sluice_status_code code, const char *message,
                                  sluice_buf *resp) {
  if (!call || !call->route)
    return SLUICE_ERR_INVALID_ARG;
  if (code == SLUICE_STATUS_OK && !resp && !streams_responses(call))
    return SLUICE_ERR_INVALID_ARG;
  return finish(call, code, message, NULL, resp);
}

int sluice_server_call_reply(sluice_server_call *call,
                             const ProtobufCMessage *resp) {
  return sluice_server_call_finish(call, SLUICE_STATUS_OK, NULL, resp);
}

/* Whether the handler may still send a streamed response. */
static int can_send(sluice_server_call *call) {
  if (!streams_responses(call) ||
      __atomic_load_n(&call->finished, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&call->cancelled, __ATOMIC_RELAXED))
    return SLUICE_ERR_STATE;
  return 0;
}

int sluice_server_call_send_ex(sluice_server_call *call,
                               const ProtobufCMessage *msg, unsigned flags) {
  if (!call || !msg || !call->route || !call->route->method->response ||
      msg->descriptor != call->route->method->response)
    return SLUICE_ERR_INVALID_ARG;
  int rv = can_send(call);
  return rv ? rv : queue_response(call, msg, flags, 0, NULL);
}

int sluice_server_call_send_buf_ex(sluice_server_call *call, sluice_buf *msg,
                                   unsigned flags) {
  if (!call || !msg || !call->route)
    return SLUICE_ERR_INVALID_ARG;
  int rv = can_send(call);
  return rv ? rv : queue_response_buf(call, msg, flags, 0, NULL);
}

int sluice_server_call_send_buf(sluice_server_call *call, sluice_buf *msg) {
  return sluice_server_call_send_buf_ex(call, msg, 0);
}

int sluice_server_call_send(sluice_server_call *call,
                            const ProtobufCMessage *msg) {
  return sluice_server_call_send_ex(call, msg, 0);
}

/* Both kinds of handlers: h's on_message is a raw_on_message_fn on a raw
 * route. */
static int set_handlers(sluice_server_call *call,
                        const sluice_server_call_handlers *h, void *user_data) {
  if (__atomic_load_n(&call->finished, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&call->handlers_set, __ATOMIC_ACQUIRE))
    return SLUICE_ERR_STATE;
  call->h = *h;
  call->h_ud = user_data;
  __atomic_store_n(&call->handlers_set, 1, __ATOMIC_RELEASE);
  post_resume(call);
  return 0;
}

int sluice_server_call_set_handlers(sluice_server_call *call,
                                    const sluice_server_call_handlers *h,
                                    void *user_data) {
  if (!call || !h || !call->route || call->route->raw)
    return SLUICE_ERR_INVALID_ARG;
  return set_handlers(call, h, user_data);
}

int sluice_server_call_set_raw_handlers(
    sluice_server_call *call, const sluice_server_call_raw_handlers *h,
    void *user_data) {
  if (!call || !h || !call->route || !call->route->raw)
    return SLUICE_ERR_INVALID_ARG;
  sluice_server_call_handlers same = {
      (void (*)(sluice_server_call *, const ProtobufCMessage *,
                void *))h->on_message,
      h->on_half_close, h->on_send_ready, h->on_done};
  return set_handlers(call, &same, user_data);
}

/* The typed handlers live in the call object, so the trampolines' user_data
 * needs no allocation of its own. Checked before the copy, which must not
 * overwrite the handlers of a call that already has them. */
int sluice_server_call_set_handlers_typed(
    sluice_server_call *call, const sluice_server_call_handlers *tramps,
    const sluice_server_call_typed_handlers *typed) {
  if (!call || !tramps || !typed)
    return SLUICE_ERR_INVALID_ARG;
  if (__atomic_load_n(&call->finished, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&call->handlers_set, __ATOMIC_ACQUIRE))
    return SLUICE_ERR_STATE;
  call->typed = *typed;
  return sluice_server_call_set_handlers(call, tramps, &call->typed);
}

int sluice_server_call_set_recv_paused(sluice_server_call *call, int paused) {
  if (!call)
    return SLUICE_ERR_INVALID_ARG;
  __atomic_store_n(&call->want_paused, paused ? 1 : 0, __ATOMIC_RELEASE);
  if (paused && sluice__loop_on_thread(call->lp->loop))
    call->st.s.recv.paused = 1;
  post_resume(call);
  return 0;
}

int sluice_server_call_set_compression(sluice_server_call *call,
                                       sluice_compression c) {
  if (!call || (c != SLUICE_COMPRESS_NONE && c != SLUICE_COMPRESS_GZIP))
    return SLUICE_ERR_INVALID_ARG;
  if (__atomic_load_n(&call->headers_sent, __ATOMIC_ACQUIRE))
    return SLUICE_ERR_STATE;
  __atomic_store_n(&call->compression, (int)c, __ATOMIC_RELEASE);
  return 0;
}

int sluice_server_call_message_compressed(const sluice_server_call *call) {
  return call ? call->msg_compressed : 0;
}

size_t sluice_server_call_recv_buffered_max(const sluice_server_call *call) {
  return call ? __atomic_load_n(&call->st.s.recv.buffered_max, __ATOMIC_RELAXED)
              : 0;
}

/* Any thread, like send and finish: under md_lock, so the loop never reads a
 * list being appended to, and a kind the loop has closed (sent, or the call
 * is over: finished, failed by the library, reset, shut down) is refused
 * rather than silently dropped. */
static int add_md(sluice_server_call *call, int kind, sluice_metadata **md,
                  const char *key, const void *value, size_t len) {
  int rv;
  uv_mutex_lock(md_lock(call));
  if ((call->md_closed & kind) ||
      __atomic_load_n(&call->finished, __ATOMIC_ACQUIRE))
    rv = SLUICE_ERR_STATE;
  else if (!*md && sluice_metadata_new(md) != 0)
    rv = SLUICE_ERR_NOMEM;
  else if (kind == SLUICE__MD_TRAILING && key && value &&
           strcmp(key, "grpc-retry-pushback-ms") == 0)
    /* The one grpc- key a handler sets: its retry pushback (gRFC A6), e.g.
     * "-1" (do not retry) or "250" (retry in 250 ms); any printable value
     * goes, as the client must cope with malformed ones. */
    rv = sluice__md_ascii_value_valid(value, len)
             ? sluice__metadata_append(*md, key, strlen(key), value, len)
             : SLUICE_ERR_BAD_METADATA;
  else
    rv = sluice_metadata_add(*md, key, value, len);
  uv_mutex_unlock(md_lock(call));
  return rv;
}

int sluice_server_call_add_initial_metadata(sluice_server_call *call,
                                            const char *key, const void *value,
                                            size_t len) {
  if (!call)
    return SLUICE_ERR_INVALID_ARG;
  return add_md(call, SLUICE__MD_INITIAL, &call->initial_md, key, value, len);
}

int sluice_server_call_add_trailing_metadata(sluice_server_call *call,
                                             const char *key, const void *value,
                                             size_t len) {
  if (!call)
    return SLUICE_ERR_INVALID_ARG;
  return add_md(call, SLUICE__MD_TRAILING, &call->trailing_md, key, value, len);
}

/* Made on the first request for it when the client sent nothing but
 * :authority and user-agent (most calls, whose handlers never ask): the
 * list the connection filled went back to it. Concurrent first requests
 * each make one and all but the first published are freed. Out of memory,
 * an empty list that nobody frees. */
const sluice_metadata *
sluice_server_call_metadata(const sluice_server_call *call) {
  static const sluice_metadata none; /* count 0 */
  if (!call)
    return NULL;
  /* The call is not const to the library: only the handler's view is. */
  sluice_metadata **slot = &((sluice_server_call *)call)->md;
  sluice_metadata *md = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (md)
    return md;
  const sluice__scall_origin *o = call->origin;
  if (sluice_metadata_new(&md) != 0)
    return &none;
  if ((o->authority &&
       sluice__metadata_append(md, ":authority", 10, o->authority,
                               o->authority_len) != 0) ||
      (o->user_agent &&
       sluice__metadata_append(md, "user-agent", 10, o->user_agent,
                               o->user_agent_len) != 0)) {
    sluice_metadata_del(md);
    return &none;
  }
  sluice_metadata *was = NULL;
  if (!__atomic_compare_exchange_n(slot, &was, md, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    sluice_metadata_del(md);
    return was;
  }
  return md;
}

int sluice_server_call_report_downstream(const sluice_server_call *call,
                                         double pressure) {
  if (!call || pressure != pressure)
    return SLUICE_ERR_INVALID_ARG;
  sluice__load_note_downstream(call->lp->shared->load, pressure);
  return 0;
}

uint64_t sluice_server_call_deadline(const sluice_server_call *call) {
  return call ? call->st.deadline_ns : 0;
}

const char *sluice_server_call_peer_identity(const sluice_server_call *call) {
  return call ? call->origin->identity : NULL;
}

const char *sluice_server_call_peer(const sluice_server_call *call) {
  return call ? call->origin->peer : NULL;
}

const sluice_method_desc *
sluice_server_call_method(const sluice_server_call *call) {
  return call && call->route ? call->route->method : NULL;
}

int sluice_server_call_is_cancelled(const sluice_server_call *call) {
  return call ? __atomic_load_n(&call->cancelled, __ATOMIC_RELAXED) : 1;
}
