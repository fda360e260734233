/* Internal structures of the client layer: channel -> destinations -> HTTP/2
 * connections -> calls. Everything here lives on the channel's loop thread,
 * except where a comment says otherwise. */
#ifndef SLUICE_CLIENT_CLIENT_H
#define SLUICE_CLIENT_CLIENT_H

#include <stdint.h>

#include "core/loop.h"
#include "core/objcache.h"
#include "lb/lb.h"
#include "sluice/call.h"
#include "sluice/channel.h"
#include "transport/addr.h"
#include "transport/conn.h"
#include "transport/recv.h"
#include "transport/sendq.h"

#define SLUICE__DROP_WAIT 5

typedef struct sluice__dest sluice__dest;
typedef struct sluice__cconn sluice__cconn;
typedef struct sluice_call sluice__ccall;

/* Intrusive doubly linked list node. */
typedef struct sluice__link {
  struct sluice__link *prev, *next;
} sluice__link;

void sluice__link_init(sluice__link *head);
void sluice__link_push(sluice__link *head, sluice__link *n);
void sluice__link_remove(sluice__link *n);
int sluice__link_empty(const sluice__link *head);

typedef enum {
  SLUICE__CALL_NEW,     /* created, not yet on the loop */
  SLUICE__CALL_PENDING, /* waiting for a connection or a free stream */
  SLUICE__CALL_ACTIVE,  /* on an HTTP/2 stream */
  SLUICE__CALL_DONE     /* callback fired; waiting for handles to close */
} sluice__call_state;

/* One client call, of any kind. Fields are loop-thread only unless marked
 * "any thread". */
struct sluice_call {
  sluice__task start_task;
  sluice__task kick_task;    /* resume the data provider (any thread) */
  sluice__task ready_task;   /* report on_send_ready */
  sluice__task resume_task;  /* apply want_paused, deliver held messages */
  sluice__task fail_task;    /* cancel / local failure (any thread) */
  sluice__task release_task; /* the user's reference (any thread) */
  int kick_posted, resume_posted, fail_posted; /* atomic */
  sluice__link link; /* in ch->pending or cconn->calls */
  sluice_channel *ch;
  const sluice_method_desc *method;
  sluice__call_state state;
  /* request: serialized messages, drained by the data provider */
  sluice__sendq sendq; /* any thread (own lock) */
  uint32_t max_request_size;
  sluice_compression compression;
  uint64_t deadline_ns; /* 0 = none */
  uint32_t max_response_size;
  sluice_metadata *send_md;
  /* completion: the unary API's trampoline, or the call handlers */
  sluice_unary_tramp tramp;
  sluice_generic_fn cb;
  sluice_call_handlers h;
  void *user_data;
  /* requests from other threads */
  int want_paused;             /* atomic */
  sluice_status_code fail_req; /* set before fail_task is posted */
  char fail_req_msg[160];
  /* transport */
  sluice__cconn *conn;
  int32_t stream_id;
  uv_timer_t timer;
  int timer_open;
  int refs; /* logical + user handle + timer handle + open stream */
  /* response */
  int http_status;
  int got_headers; /* response HEADERS seen */
  int have_grpc_status;
  sluice_status_code grpc_status;
  char *grpc_message;
  int bad_content_type;
  int enc_ok;             /* grpc-encoding known */
  sluice_compression enc; /* the response's grpc-encoding */
  int last_compressed;
  sluice_metadata *hdr_md; /* header block being received */
  sluice_metadata *initial_md, *trailing_md;
  sluice__recv recv;
  ProtobufCMessage *resp; /* unary API: the response */
  int n_msgs;
  int final_pending; /* stream ended OK; held messages still to deliver */
  uint32_t final_h2_error;
  sluice_status_code fail_code; /* a local failure while receiving */
  const char *fail_reason;
  char fail_buf[160];
  uint64_t start_ns;
  /* load balancing */
  sluice__lb_call lbc;
  sluice__dest *lb_dest; /* where it was sent, until the balancer heard of
                            its end */
  uint64_t pick_ns;      /* when dispatch first considered it */
  uint64_t sent_ns;
  uint64_t wait_since; /* in the wait queue since (0 = not waiting) */
  int strat_done;      /* strategy time recorded */
  uint64_t resp_bytes;
};

typedef enum {
  SLUICE__DEST_IDLE,
  SLUICE__DEST_CONNECTING,
  SLUICE__DEST_READY,
  SLUICE__DEST_TRANSIENT_FAILURE
} sluice__dest_state;

/* One resolved address of the channel and its connection. */
struct sluice__dest {
  sluice_channel *ch;
  sluice__addr addr;
  sluice__dest_state state;
  sluice__cconn *conn; /* the connection new calls go to, or NULL */
  uv_timer_t backoff_timer;
  int timer_open;
  uint64_t backoff_ms; /* next back-off delay */
  char last_error[256];
  int removed; /* dropped by re-resolution; freed when it has no conns */
  int n_conns; /* live connections (active + draining) */
  uint64_t in_flight;
  sluice__lb_dest lb; /* the balancer's view and stats */
  int ever_ready;     /* connected before (a reconnect resets lb) */
};

/* One HTTP/2 client connection. */
struct sluice__cconn {
  sluice__conn conn; /* first: the transport */
  sluice__dest *dest;
  sluice__link calls;
  uint32_t active_streams;
  int ready;    /* TCP connected and session created */
  int draining; /* GOAWAY received: no new streams */
  int failed_before_ready;
  int got_settings; /* the server's first SETTINGS arrived */
};

struct sluice_channel_opts {
  uv_loop_t *loop;
  uint32_t max_response_size;
  uint32_t max_request_size;
  char *authority;
  uint32_t resolve_interval_ms;
  uint32_t backoff_initial_ms, backoff_max_ms;
  uint32_t connect_timeout_ms;
  struct ssl_ctx_st *tls;   /* NULL: plaintext; a reference */
  char *tls_name;           /* server_name_override, or NULL */
  const sluice__lb_ops *lb; /* strategy (default btc) */
  uint32_t wait_max_len;    /* bounded wait queue; 0 = drop at once */
  uint32_t wait_max_ms;
  char last_error[256];
};

struct sluice_channel {
  sluice__loop *loop;
  struct sluice_channel_opts opts;
  sluice__target target;
  char *authority;
  char user_agent[64];
  sluice__dest **dests;
  size_t n_dests;
  size_t rr_next;
  sluice__link pending;
  sluice__link waiting; /* admitted by no destination: the wait queue */
  size_t n_waiting;
  /* freed call objects, reused by calls started on the loop thread (a
   * closed loop, a handler forwarding); loop thread only */
  sluice__objcache call_cache;
  uv_timer_t wait_timer;
  int wait_timer_open, wait_timer_on;
  sluice__lb lb;
  const sluice_method_desc *paths[SLUICE__LB_MAX_PATHS];
  size_t n_paths;
  sluice__lb_dest **lb_views; /* scratch for pick(), n_dests entries */
  uint64_t dropped[6];        /* by sluice__lb_verdict; SLUICE__DROP_WAIT: the
                                 wait queue was full or the wait too long */
  size_t lb_views_cap;
  uv_getaddrinfo_t gai;
  int resolving;
  int resolved_once;
  char resolve_error[160];
  uv_timer_t resolve_timer;
  int resolve_timer_open;
  int closing;
  uint64_t live_calls; /* started and not yet freed; atomic */
  size_t live_dests;   /* created and not yet freed */
  sluice__task del_task;
  int owned_loop;
};

/* channel.c */
void sluice__channel_dispatch(sluice_channel *ch);
void sluice__channel_request_resolve(sluice_channel *ch);
void sluice__channel_maybe_free(sluice_channel *ch);

/* dest.c */
int sluice__dest_new(sluice__dest **out, sluice_channel *ch,
                     const sluice__addr *addr);
void sluice__dest_connect(sluice__dest *d);
void sluice__dest_remove(sluice__dest *d);
/* Non-zero when the destination can take one more stream now. */
int sluice__dest_has_capacity(const sluice__dest *d);
void sluice__dest_conn_ready(sluice__dest *d, sluice__cconn *c);
void sluice__dest_conn_failed(sluice__dest *d, sluice__cconn *c,
                              const char *reason, int was_ready);

/* client_conn.c */
int sluice__cconn_new(sluice__cconn **out, sluice__dest *d);
int sluice__cconn_submit(sluice__cconn *c, sluice__ccall *call);
void sluice__cconn_cancel_stream(sluice__cconn *c, sluice__ccall *call,
                                 uint32_t h2_error);
int sluice__cconn_can_take(const sluice__cconn *c);

/* channel.c: the path slot of a method for the balancer. */
uint32_t sluice__channel_path_id(sluice_channel *ch,
                                 const sluice_method_desc *m);
/* channel.c: the balancer hears that call (sent to call->lb_dest) ended. */
void sluice__channel_lb_done(sluice__ccall *call, sluice_status_code code);
/* The call was refused before its server processed it and goes back to
 * the pending list (transparent retry): the balancer forgets it was sent. */
void sluice__channel_lb_unsent(sluice__ccall *call);
/* A server's load report arrived on d's connection. */
void sluice__channel_peer_load(sluice__dest *d, const sluice_metadata *md);

/* call.c */
void sluice__ccall_start(sluice__ccall *call);
/* Completes the call with code/message (copied) unless already done. */
void sluice__ccall_complete(sluice__ccall *call, sluice_status_code code,
                            const char *message);
/* The stream ended (on_stream_close): derive the final status. */
void sluice__ccall_stream_closed(sluice__ccall *call, uint32_t h2_error);
void sluice__ccall_unref(sluice__ccall *call);
/* Delivers one received message (the recv layer's deliver function). */
int sluice__ccall_deliver(void *call, int compressed, const uint8_t *msg,
                          size_t len);
/* Data provider body: fills buf from the send queue. */
ssize_t sluice__ccall_read(sluice__ccall *call, uint8_t *buf, size_t len,
                           uint32_t *flags);

#endif
