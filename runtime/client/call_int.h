/* Internal structure of a client call and its attempts: the top of the
 * client's internal stack (call -> channel -> picker -> subchannel ->
 * connection -> stream).
 *
 * The call holds what the user sees and what survives an attempt: the
 * request (the send queue, retained for unary and server-streaming calls
 * so it can be replayed), the deadline, the handlers, the final status and
 * metadata. An attempt is one try on one stream: its pick (the balancer's
 * accounting), its stream on a subchannel's connection and what that
 * stream received. Today a call has one attempt at a time (a transparent
 * replay after REFUSED_STREAM reuses its storage); retries and hedging
 * will give it several. Loop thread unless marked "any thread".
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
  sluice__pick pick;  /* queued in the picker; then the LB accounting */
  sluice__cstream cs; /* the stream and what it received */
  int n_msgs;         /* response messages delivered */
  int final_pending;  /* ended OK; held messages still to deliver */
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
  sluice_status_code fail_req; /* set before fail_task is posted */
  char fail_req_msg[160];
  /* a failure before the call reached the loop (too large, cancelled) */
  sluice_status_code fail_code;
  const char *fail_reason;
  char fail_buf[160];
  uv_timer_t timer; /* the deadline */
  int timer_open;
  int refs; /* logical + user handle + timer handle + open stream */
  uint64_t start_ns;
  /* what the user gets */
  sluice_metadata *initial_md, *trailing_md;
  ProtobufCMessage *resp; /* unary API: the response */
  int last_compressed;
  /* attempts: the current one lives in first (see the file comment) */
  sluice__list attempts;
  unsigned n_attempts;
  sluice__attempt first;
};

#endif
