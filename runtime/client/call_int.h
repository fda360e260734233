/* Internal structure of a client call and its attempts: the top of the
 * client's internal stack (call -> channel -> picker -> subchannel ->
 * connection -> stream).
 *
 * The call holds what the user sees and what survives an attempt: the
 * request (the send queue, retained for unary and server-streaming calls
 * so it can be replayed), the deadline, the handlers, the final status and
 * metadata. An attempt is one try on one stream: its pick (the balancer's
 * accounting), its stream on a subchannel's connection and what that
 * stream received. A call has one attempt at a time when it retries (a
 * retry, like a transparent replay after REFUSED_STREAM, reuses the first
 * attempt's storage once its stream closed) and several at once when it
 * hedges (each hedge allocated with its own copy of the request). The
 * attempt whose response headers arrive first is the one the call commits
 * to: only its headers and messages reach the application. Loop thread
 * unless marked "any thread".
 */
#ifndef SLUICE_CLIENT_CALL_INT_H
#define SLUICE_CLIENT_CALL_INT_H

#include <stdint.h>

#include "client/channel_int.h"
#include "client/client_h2.h"
#include "client/picker.h"
#include "core/list.h"
#include "core/loop.h"
#include "sluice/call.h"
#include "transport/sendq.h"

typedef enum {
  SLUICE__CALL_NEW,     /* created, not yet on the loop */
  SLUICE__CALL_STARTED, /* on the loop: its attempt picks or streams */
  SLUICE__CALL_DONE     /* on_done fired; waiting for handles to close */
} sluice__call_state;

typedef enum {
  SLUICE__ATTEMPT_PICKING, /* waiting for the picker (or not yet queued) */
  SLUICE__ATTEMPT_ACTIVE,  /* on an HTTP/2 stream */
  SLUICE__ATTEMPT_ENDED    /* its stream closed */
} sluice__attempt_state;

typedef struct sluice__attempt {
  struct sluice_call *call;
  sluice__list link; /* in call->attempts */
  sluice__attempt_state state;
  int live;          /* picking or on a stream (counted in the call's n_live) */
  int hedge;         /* a hedged attempt (allocated: a sluice__hedge) */
  int got_headers;   /* response headers arrived: the call commits to it */
  sluice__pick pick; /* queued in the picker; then the LB accounting */
  sluice__cstream cs;           /* the stream and what it received */
  int n_msgs;                   /* response messages delivered */
  int final_pending;            /* ended OK; held messages still to deliver */
  sluice_status_code fail_code; /* a local failure while receiving */
  const char *fail_reason;
  char fail_buf[160];
} sluice__attempt;

/* What the blocking call's completion receives: it may take the response
 * and the metadata (set the fields to NULL). */
typedef struct sluice__call_result {
  sluice_status st;
  ProtobufCMessage *resp;
} sluice__call_result;
typedef void (*sluice__take_fn)(sluice__call_result *r, void *user_data);

struct sluice_call {
  sluice__task start_task;
  sluice__task kick_task;    /* resume the data provider (any thread) */
  sluice__task ready_task;   /* report on_send_ready */
  sluice__task resume_task;  /* apply want_paused, deliver held messages */
  sluice__task fail_task;    /* cancel / local failure (any thread) */
  sluice__task release_task; /* the user's reference (any thread) */
  int kick_posted, resume_posted, fail_posted; /* atomic */
  /* atomic: the first request_fail() claims the failure here, writes
   * fail_req and fail_req_msg, then sets fail_posted (release): a thread
   * that sees fail_posted may read them. */
  int fail_claimed;
  sluice_channel *ch;
  const sluice_method_desc *method;
  sluice__call_state state;
  /* request: serialized messages, drained by the attempt's stream */
  sluice__sendq sendq; /* any thread (own lock) */
  uint32_t max_request_size;
  sluice_compression compression;
  uint64_t deadline_ns; /* 0 = none */
  uint32_t max_response_size;
  sluice_metadata *send_md;
  /* completion: exactly one of the unary trampoline (tramp + cb), the
   * blocking call's take, or the call handlers (h) */
  sluice_unary_tramp tramp;
  sluice_generic_fn cb;
  sluice__take_fn take;
  sluice_call_handlers h;
  void *user_data;
  /* sluice_call_start_typed: user_data points here */
  sluice_call_typed_handlers typed;
  /* requests from other threads */
  int want_paused;             /* atomic */
  sluice_status_code fail_req; /* set before fail_posted */
  /* fail_req's text (malloc'd), or NULL. The rare failure allocates its
   * texts, rather than every call carrying 320 bytes of buffers. */
  char *fail_req_msg;
  /* a failure before the call reached the loop (too large, cancelled) */
  sluice_status_code fail_code;
  const char *fail_reason;
  char *fail_text;  /* a formatted fail_reason's own copy (malloc'd), or NULL */
  uv_timer_t timer; /* the deadline, a retry's backoff, the next hedge */
  int timer_open;
  int refs; /* logical + user handle + timer handle + open stream */
  uint64_t start_ns;
  /* what the user gets */
  sluice_metadata *initial_md, *trailing_md;
  ProtobufCMessage *resp; /* unary API: the response */
  int last_compressed;
  int raw; /* sluice_call_start_raw: h.on_message is a raw_on_message_fn */
  /* attempts (see the file comment): first, then hedges */
  sluice__list attempts;
  sluice__attempt first;
  /* retries and hedging (client/retry.h), resolved when the call is made:
   * at most one of rp and hp; they point into the channel's options, the
   * method's table or own (the call's options) */
  const sluice_retry_policy *rp;
  const sluice_hedging_policy *hp;
  union {
    sluice_retry_policy rp;
    sluice_hedging_policy hp;
  } own;
  unsigned max_attempts; /* the policy's, clamped to the cap */
  unsigned n_tries;      /* attempts made, replays not counted */
  unsigned backoff_n;    /* retries since the last pushback */
  unsigned n_live;       /* attempts picking or on a stream */
  uint32_t path_id;      /* the picker's, for per-method counters */
  int child;   /* made by a server's handler (sluice_call_opts_set_parent) */
  int counted; /* in the channel's active calls */
  int wait_for_ready;      /* waits out TRANSIENT_FAILURE (its picks do) */
  int in_retry;            /* in the channel's calls in retry */
  uint32_t last_sc_index;  /* last_sc's index then (picker.h) */
  sluice__attempt *winner; /* the committed attempt; NULL: none yet */
  struct sluice__subchannel *last_sc; /* where the last attempt went */
  uint64_t retry_at_ns;               /* a retry waits until then; 0: none */
  sluice__parked parked; /* in ch->res.parked while retry_at_ns is set, or
                            while an attempt's final_pending is */
  uint64_t hedge_at_ns;  /* the next hedge is due then; 0: none */
  sluice_status_code last_code; /* a hedged call's last failed attempt */
  char *last_text;              /* its text (owned; NULL: none) */
};

/* A hedged attempt and its own copy of the request. */
typedef struct sluice__hedge {
  sluice__attempt a;
  sluice__sendq q;
} sluice__hedge;

/* A raw call's on_message, stored in h.on_message (sluice_call_start_raw):
 * cast back before calling. */
typedef void (*sluice__raw_on_message_fn)(sluice_call *call, sluice_buf *msg,
                                          void *user_data);

/* ---- between call.c (the call) and attempt.c (its attempts) */

/* call.c: completes c with code/message (copied) unless already done: a
 * (the attempt it ends with, may be NULL) tells the balancer code, every
 * other live attempt is cancelled, then the user's completion runs. */
void sluice__call_complete(sluice_call *c, sluice__attempt *a,
                           sluice_status_code code, const char *message);
/* call.c: drops a reference (the stream's, the timer's ...). */
void sluice__call_unref(sluice_call *c);
/* call.c: (re)arms the call's one timer for the earliest of its deadline,
 * its retry and its next hedge. */
void sluice__call_timer_arm(sluice_call *c);

/* attempt.c: a as a fresh attempt of c over send queue q, not queued. */
void sluice__attempt_init(sluice_call *c, sluice__attempt *a, sluice__sendq *q);
/* attempt.c: the first attempt (and, hedging without delay, the hedges). */
void sluice__call_start_attempts(sluice_call *c);
/* attempt.c: the retry whose backoff is over. */
void sluice__call_retry_now(sluice_call *c);
/* attempt.c: sends the next hedge if the throttle, the budget and the
 * breaker allow it. Returns 0, or -1 when none was sent. */
int sluice__call_hedge(sluice_call *c);
/* attempt.c: see sluice__call_complete. */
void sluice__call_stop_attempts(sluice_call *c, sluice__attempt *a,
                                sluice_status_code code);
/* attempt.c: frees the hedges' storage and the streams' (call_free). */
void sluice__call_free_attempts(sluice_call *c);
/* attempt.c: the attempt whose messages reach the application. */
sluice__attempt *sluice__call_recv_attempt(sluice_call *c);
/* attempt.c: delivers held messages (resume), completing when done. */
void sluice__call_drain_held(sluice_call *c);

#endif
