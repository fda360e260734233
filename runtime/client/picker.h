/* The picker: the channel's glue to the balancer (runtime/lb). It holds the
 * attempts waiting to be sent (new ones, then the bounded wait queue of
 * those every destination refused), asks the strategy where each may go,
 * opens its stream on the chosen subchannel through the attempt's ops,
 * drops early (with a clear status, without I/O) what no destination will
 * take, opens the chosen stream, and keeps the per-attempt balancer
 * accounting (sent, done,
 * unsent) and the drop counters.
 *
 * Below the call and the channel, above the subchannels. Upward it reports
 * only through the ops of each sluice__pick (sent / fail). Loop thread only.
 */
#ifndef SLUICE_CLIENT_PICKER_H
#define SLUICE_CLIENT_PICKER_H

#include <stdint.h>

#include "client/subchannel.h"
#include "core/list.h"
#include "lb/lb.h"
#include "sluice/clock.h"
#include "sluice/method.h"

/* Drop reasons: a verdict of the balancer, or the wait queue's. */
enum {
  SLUICE__DROP_WAIT = SLUICE__LB_N_VERDICTS, /* queue full or wait too long */
  SLUICE__DROP_NOT_SERVING, /* every destination's health check says no */
  SLUICE__N_DROPS
};

typedef struct sluice__pick sluice__pick;

typedef struct sluice__pick_ops {
  /* Its stream was opened on pk->sc. */
  void (*sent)(sluice__pick *pk);
  /* Dropped (no destination will take it; no I/O happened), or the
   * connection refused the stream. */
  void (*fail)(sluice__pick *pk, sluice_status_code code, const char *msg);
} sluice__pick_ops;

/* One attempt as the picker sees it (embedded in the attempt). */
struct sluice__pick {
  sluice__list link; /* in pending or waiting while queued */
  const sluice__pick_ops *ops;
  sluice__cstream *cs;    /* the stream to open */
  sluice__creq req;       /* its request headers */
  sluice__lb_call lbc;    /* path, size, deadline */
  uint64_t start_ns;      /* the call's start ("decided in") */
  uint64_t pick_ns;       /* first considered */
  uint64_t wait_since;    /* in the wait queue since; 0: not waiting */
  sluice__subchannel *sc; /* sent there, until the balancer heard its end */
  uint64_t sent_ns;
  int strat_done; /* strategy time recorded */
  /* sc's index among the channel's destinations when it was sent (a hint
   * for avoid_index; 32 bits: it fills a hole, and a call stays within
   * 2 KiB, call.c) */
  uint32_t sc_index;
  /* Set by the attempt: a destination to avoid when another is usable
   * (the previous attempt's; NULL: none). */
  sluice__subchannel *avoid;
  /* Where avoid was among the destinations (its attempt's sc_index): found
   * there in O(1) unless the destinations changed since. */
  uint32_t avoid_index;
  /* A hedge: sent only where the strategy admits it now; refused, it fails
   * at once (RESOURCE_EXHAUSTED, not counted as a drop), never waits. */
  int hedge;
  /* Wait-for-ready: not failed fast while no destination is connecting or
   * ready; it waits for one (its call's deadline ends it). */
  int wait_for_ready;
};

typedef struct sluice__picker {
  sluice__lb lb;
  sluice__list pending; /* new attempts, oldest first */
  sluice__list waiting; /* refused by every destination: the wait queue */
  size_t n_waiting;
  size_t n_queued; /* pending + waiting */
  uint32_t wait_max_len, wait_max_ms;
  sluice__loop *loop;
  uv_timer_t wait_timer;
  int wait_timer_open, wait_timer_on;
  const sluice_method_desc *paths[SLUICE__LB_MAX_PATHS];
  size_t n_paths;
  /* &scs[i]->lb for the channel's subchannels, rebuilt only when the set
   * changes (sluice__picker_dests_changed), and handed to the balancer
   * (sluice__lb_set_dests: its table, which also counts the usable). */
  sluice__lb_dest **views;
  size_t views_cap, views_n;
  int views_stale;
  uint64_t dropped[SLUICE__N_DROPS];
  /* lb.pressure as double bits for other threads (sluice__picker_pressure);
   * kept only once the channel is inside a chain (lb.inner). */
  uint64_t pressure_bits;
  void (*kick)(void *ud);   /* the wait timer fired: dispatch again */
  void (*closed)(void *ud); /* the wait timer's handle closed */
  void *ud;
} sluice__picker;

void sluice__picker_init(sluice__picker *p, const sluice__lb_ops *ops,
                         uint32_t wait_max_len, uint32_t wait_max_ms,
                         sluice__loop *loop, void (*kick)(void *),
                         void (*closed)(void *), void *ud);
/* Closes the wait timer (closed() follows if it was open); frees the
 * scratch. Returns non-zero when closed() is still to come. */
int sluice__picker_close(sluice__picker *p);

/* The path slot of a method (the first SLUICE__LB_MAX_PATHS - 1 methods
 * seen get their own; the rest share the last). */
uint32_t sluice__picker_path_id(sluice__picker *p, const sluice_method_desc *m);

/* A call made by a server's handler (lbc.child) that every destination
 * refuses for their limits waits this long at most, this many at a time,
 * when the channel has no wait queue of its own: inside a chain the edge
 * drops (the pressure goes up), so a refusal here would only waste the
 * work the tiers above have done. */
#define SLUICE__CHILD_WAIT_LEN 64
#define SLUICE__CHILD_WAIT_MS 50

/* The channel's back-pressure now, 0..1 (lb.pressure); < 0 when not known
 * (the channel is not inside a chain, or has decided nothing yet). Any
 * thread. */
double sluice__picker_pressure(const sluice__picker *p);
/* A call was refused before it reached the picker (a circuit breaker):
 * full back-pressure, for the parent's server to pass on. */
void sluice__picker_note_refusal(sluice__picker *p);

/* Queues pk (its lbc, start_ns and ops set) behind the others. */
void sluice__picker_add(sluice__picker *p, sluice__pick *pk);
/* Takes pk out of whichever queue it is in (no-op if none). */
void sluice__picker_remove(sluice__picker *p, sluice__pick *pk);
/* Non-zero when attempts are queued (pending or waiting). */
int sluice__picker_busy(const sluice__picker *p);

/* The channel's set of subchannels changed (added, removed, reordered):
 * the next pass rebuilds the strategy's array and every usable flag. */
void sluice__picker_dests_changed(sluice__picker *p);
/* sc's state, connection or health changed since the last pass (the
 * census's changed list): its usable flag is computed again. Between two
 * refreshes the flag keeps its value, as it did when every pass refreshed
 * them all at its start. Loop thread, between passes. */
void sluice__picker_refresh(sluice__picker *p, sluice__subchannel *sc);
/* One pass: the oldest waiters first, then new attempts, over the
 * subchannels scs[0..n) (the same set as at the last pass unless
 * sluice__picker_dests_changed said otherwise). Returns 0, or
 * SLUICE_ERR_NOMEM (nothing was tried). */
int sluice__picker_run(sluice__picker *p, sluice__subchannel **scs, size_t n);
/* Non-zero when new attempts still wait for a stream or a connection. */
int sluice__picker_has_pending(const sluice__picker *p);
/* Fails every pending attempt with code/msg, each counted as a drop of
 * reason drop (SLUICE__LB_NONE, SLUICE__DROP_NOT_SERVING) when drop >= 0,
 * except wait-for-ready ones. */
void sluice__picker_fail_pending(sluice__picker *p, sluice_status_code code,
                                 const char *msg, int drop);
/* Fails every queued attempt (pending and waiting) with code/msg. */
void sluice__picker_fail_all(sluice__picker *p, sluice_status_code code,
                             const char *msg);

/* The request of pk left (its first bytes were read): strategy time. */
void sluice__picker_flushed(sluice__pick *pk);
/* The attempt ended with code after resp_bytes of response: the balancer
 * hears it (once; no-op if never sent). */
void sluice__picker_done(sluice__picker *p, sluice__pick *pk,
                         sluice_status_code code, uint64_t resp_bytes);
/* The attempt was refused before its server processed it: the balancer
 * forgets it was sent (a transparent replay follows). */
void sluice__picker_unsent(sluice__picker *p, sluice__pick *pk);

#endif
