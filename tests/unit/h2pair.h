/* A test harness: a client and a server nghttp2 session connected back to
 * back in memory. Whatever one session's mem_send produces is fed to the
 * other's mem_recv, both ways, until neither has anything to send, so
 * stream behaviour (headers, data, flow control, resets, GOAWAY) can be
 * tested without sockets, threads or a loop.
 *
 * Everything runs on the calling thread, inside h2pair_pump*: the sessions'
 * callbacks fire from there. The pair owns both sessions; the callbacks and
 * their user data are the caller's and must outlive the pair. */
#ifndef SLUICE_TESTS_H2PAIR_H
#define SLUICE_TESTS_H2PAIR_H

#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

typedef struct h2pair {
  nghttp2_session *client;
  nghttp2_session *server;
  uint64_t c2s_bytes; /* moved from the client to the server so far */
  uint64_t s2c_bytes; /* and back */
  unsigned rounds;    /* pump rounds so far (one each way per round) */
} h2pair;

/* h2pair_pump gives up after this many rounds without going quiet: the
 * sessions are ping-ponging forever (a bug in the test or the code). */
#define H2PAIR_MAX_ROUNDS 10000

/* h2pair_pump's result when the sessions never went quiet. */
#define H2PAIR_BUSY (-1)

/* Creates the two sessions with the callbacks and user data of each side
 * (opt applies to both; NULL for nghttp2's defaults) and queues nothing:
 * the client's connection preface goes out with the first pump, and each
 * side's SETTINGS are whatever the caller submits before it (nghttp2 sends
 * an empty SETTINGS frame if none was submitted). Returns 0, or nghttp2's
 * error code (*p then holds no session). */
int h2pair_init(h2pair *p, const nghttp2_session_callbacks *client_cbs,
                void *client_ud, const nghttp2_session_callbacks *server_cbs,
                void *server_ud, const nghttp2_option *opt);

/* Moves what the client has to send into the server. Returns the bytes
 * moved (0: the client had nothing to send), or a negative nghttp2 error
 * from either session (a callback failed, a protocol error). */
long h2pair_pump_c2s(h2pair *p);

/* The same, server to client. */
long h2pair_pump_s2c(h2pair *p);

/* Pumps both ways until a round moves no byte in either direction. Returns
 * 0 once quiet, a negative nghttp2 error, or H2PAIR_BUSY after
 * H2PAIR_MAX_ROUNDS rounds. */
int h2pair_pump(h2pair *p);

/* Deletes both sessions (nghttp2 reports no stream closes from there). */
void h2pair_free(h2pair *p);

#endif
