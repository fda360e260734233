/* Internal structures of the server layer: server -> loops -> HTTP/2
 * connections -> calls. */
#ifndef SLUICE_SERVER_INTERNAL_H
#define SLUICE_SERVER_INTERNAL_H

#include <stdint.h>

#include "core/list.h"
#include "core/loop.h"
#include "core/objcache.h"
#include "server/admit.h"
#include "server/listener.h"
#include "server/load_report.h"
#include "server/server_opts.h"
#include "sluice/server.h"
#include "transport/conn.h"
#include "transport/recv.h"
#include "transport/sendq.h"

typedef struct sluice__sloop sluice__sloop;
typedef struct sluice__sconn sluice__sconn;

/* A registered method. */
typedef struct sluice__route {
  const sluice_method_desc *method;
  sluice_unary_dispatch dispatch;
  const void *handlers; /* the service's copy */
  void *user_data;
  sluice__admit_limit limit; /* max concurrent calls of this method */
} sluice__route;

struct sluice__sloop {
  sluice_server *srv;
  sluice__loop *loop;
  sluice__task drain_task;
  sluice__list conns;          /* sluice__sconn.link */
  sluice__admit_queue *aq;     /* admission */
  sluice__objcache call_cache; /* freed call objects (loop thread only) */
  int finishing; /* atomic: finish() calls on this loop's calls between
                    their check of srv->stopped and their post */
};

struct sluice_server {
  struct sluice_server_opts opts;
  sluice__route *routes;
  size_t n_routes;
  void **handler_copies;
  size_t n_services;
  sluice__listeners listeners;
  sluice__sloop *loops;
  unsigned n_loops;
  int started;
  int stopped; /* written under mu, read atomically: the loops are being
                  deleted; finish() from now on parks the call in orphans
                  instead of posting */
  int joined;  /* guarded by mu: every loop thread has exited; finish()
                  from now on frees the call on its own thread */
  sluice__list orphans; /* guarded by mu: calls finished after stopped
                           (sluice_server_call.orphan_link), freed once
                           joined */
  int shut_down;
  uv_mutex_t mu;
  uv_cond_t cv;
  unsigned live_conns; /* guarded by mu */
  sluice__load load;
  sluice__admission admit;
};

/* One HTTP/2 server connection. */
struct sluice__sconn {
  sluice__conn conn;
  sluice__sloop *sl;
  sluice__list link; /* in sl->conns */
  int draining;
  char *peer_identity; /* verified client certificate subject, or NULL */
  sluice__list calls;  /* attached to a stream (sluice_server_call.link) */
  sluice__load_pacer load_pacer; /* next load report due */
};

struct sluice_server_call {
  sluice__task run_task; /* admitted: run the handler (holds its ref) */
  sluice__task finish_task;
  sluice__task kick_task;   /* submit headers / resume data (any thread) */
  sluice__task ready_task;  /* report on_send_ready */
  sluice__task resume_task; /* handlers set or pause changed (any thread) */
  int kick_posted, resume_posted; /* atomic */
  sluice__list link;  /* in its connection's calls while attached (the
                        connection links and unlinks it) */
  sluice__conn *conn; /* its connection's transport; NULL once the stream is
                         gone */
  sluice__load_pacer *pacer; /* its connection's; NULL with conn */
  sluice_server *srv;
  sluice__sloop *sl;
  int32_t stream_id;
  sluice__route *route;
  /* request */
  char *path; /* path_buf, or strndup'd when longer */
  char path_buf[96];
  int bad_method, bad_content_type;
  uint64_t deadline_ns;
  int bad_timeout;
  int enc_ok;             /* request grpc-encoding known (or absent) */
  int enc_unknown;        /* a grpc-encoding we do not support */
  sluice_compression enc; /* the request's grpc-encoding */
  int accept_gzip;        /* the client's grpc-accept-encoding lists gzip */
  int msg_compressed;     /* the last delivered request message was */
  sluice_metadata *md;
  sluice__recv recv;
  ProtobufCMessage *req;
  int n_msgs;
  int half_closed;     /* the client's END_STREAM arrived */
  int half_close_told; /* on_half_close fired */
  sluice_status_code fail_code;
  const char *fail_reason;
  char fail_buf[160];
  char peer[64];
  char *peer_identity; /* copied from the connection, or NULL */
  uv_timer_t timer;
  int timer_open;
  sluice__admit_item adm;   /* admission (admit.c; loop thread) */
  sluice__list orphan_link; /* in srv->orphans */
  uint32_t pushback_ms; /* grpc-retry-pushback-ms in the trailers; 0: none */
  int refs;             /* stream + handler + timer */
  int responded;        /* the final status is decided: nothing more from the
                           handler is sent */
  int headers_sent;     /* atomic: response HEADERS submitted */
  int final_sent;       /* trailers (or Trailers-Only) submitted */
  int cancelled;        /* atomic: reply will be discarded */
  int finished;         /* atomic: finish was called */
  /* streaming */
  sluice_server_call_handlers h;
  void *h_ud;
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
   * loop reads a list only once it is closed. md_mu guards the lists until
   * then and md_closed. */
  uv_mutex_t md_mu;
  int md_closed;
};
enum { SLUICE__MD_INITIAL = 1, SLUICE__MD_TRAILING = 2 };

/* server_conn.c */
int sluice__sconn_accept(sluice__sloop *sl, uv_os_sock_t fd, int is_pipe);
void sluice__sconn_goaway(sluice__sconn *sc);
void sluice__sconn_close(sluice__sconn *sc, const char *reason);

/* server_call.c */
/* A call for stream stream_id of conn; the caller links it into its list
 * of calls. peer_identity is copied; pacer is borrowed while the stream is
 * open. */
sluice_server_call *sluice__scall_new(sluice__sloop *sl, sluice__conn *conn,
                                      int32_t stream_id,
                                      const char *peer_identity,
                                      sluice__load_pacer *pacer);
/* After every loop thread has exited: frees the calls finished while the
 * loops were being deleted; later finishes free their call directly. */
void sluice__server_free_orphans(sluice_server *srv);
/* The request headers are complete and routed: set up receiving; a
 * client-streaming or bidi method is dispatched now. */
void sluice__scall_headers_done(sluice_server_call *call);
/* The request is complete (END_STREAM): a unary or server-streaming method
 * is dispatched; a streaming one learns of the half-close. */
void sluice__scall_request_done(sluice_server_call *call);
/* Data for the call's stream (consumes the window as messages are
 * delivered). */
void sluice__scall_data(sluice_server_call *call, const uint8_t *data,
                        size_t len);
/* Answers with an error (trailers-only) from the library itself. */
void sluice__scall_fail(sluice_server_call *call, sluice_status_code code,
                        const char *message);
/* The stream closed (or the connection died; h2_error then CANCEL); the
 * caller has unlinked the call. */
void sluice__scall_stream_closed(sluice_server_call *call, uint32_t h2_error);
void sluice__scall_unref(sluice_server_call *call);

sluice__route *sluice__server_route(sluice_server *srv, const char *path,
                                    size_t len);
void sluice__server_conn_gone(sluice_server *srv);

#endif
