/* The load report: an ORCA OrcaLoadReport (xds.data.orca.v3) sent in the
 * trailers of responses (endpoint-load-metrics-bin, base64), and the ~1 s
 * window its rates come from. Fed by admission (handlers finished, queue
 * times), read by the calls when they write their trailers; every field
 * the report shows is documented at sluice_server_opts_set_load_report.
 * Thread-safe: counters are atomics, one thread at a time rolls the
 * window, the others read the last one. */
#ifndef SLUICE_SERVER_LOAD_REPORT_H
#define SLUICE_SERVER_LOAD_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/server_opts.h"

/* Room for the base64 of a report, with its terminating NUL. */
#define SLUICE__LOAD_REPORT_B64 160

typedef struct sluice__load {
  /* constant after sluice__load_init */
  int on;               /* send reports at all */
  uint32_t interval_ms; /* per connection; 0: every response */
  uint32_t capacity;    /* max concurrent calls: cpu_utilization's
                           denominator; 0: no limit, no cpu_utilization */
  /* atomics */
  uint64_t completions;   /* handlers finished */
  uint64_t q_sum_us, q_n; /* queue time of calls that left the queue */
  uint64_t rps_bits, queue_ms_bits; /* doubles of the last window */
  uint64_t app_util_bits;           /* double: sluice_server_set_utilization,
                                       negative = not given */
  /* The downstream pressure noted by the handlers' calls: the largest of
   * each 100 ms bucket, in two slots by the bucket's parity (each slot:
   * bucket number + 1, 0 = empty; double bits of the maximum). */
  uint64_t down_bucket[2], down_max_bits[2];
  uint64_t win_start; /* ns */
  uv_mutex_t win_mu;  /* one thread rolls the window */
  uint64_t win_completions, win_q_sum_us, win_q_n; /* under win_mu */
} sluice__load;

/* Once per connection: when its next report is due (reports are paced per
 * connection, see sluice_server_opts_set_load_report_interval). */
typedef struct sluice__load_pacer {
  uint64_t next_ns;
} sluice__load_pacer;

/* Sets l up from the options (no application utilization given yet). */
void sluice__load_init(sluice__load *l, const sluice_server_opts *o);
void sluice__load_destroy(sluice__load *l);

/* The server started: the first window starts now. */
void sluice__load_start(sluice__load *l);

/* A handler finished (its call held a slot). */
void sluice__load_completed(sluice__load *l);

/* A call left the admission queue for its handler after ns. */
void sluice__load_queued(sluice__load *l, uint64_t ns);

/* The mean queue time of the last window, in ms. */
double sluice__load_queue_ms(const sluice__load *l);

/* sluice_server_set_utilization: returns 0, or SLUICE_ERR_INVALID_ARG for
 * NaN. */
int sluice__load_set_utilization(sluice__load *l, double utilization);

/* The services the handlers call push back this much now (0..1; NaN is
 * ignored, the rest clamped). The report carries the largest figure noted
 * in the last 100-200 ms as its named metric "downstream" (a server whose
 * handlers call several services is as pressed as the most pressed one),
 * and none once nothing was noted for that long. */
void sluice__load_note_downstream(sluice__load *l, double pressure);

/* Whether a response's trailers carry a report: reports on, and either no
 * pacing (no interval, or p NULL: a shed call's report always goes) or p's
 * next report is due (then the one after is scheduled). */
int sluice__load_due(const sluice__load *l, sluice__load_pacer *p);

/* The report with in_flight calls in flight now: base64 into out (at least
 * SLUICE__LOAD_REPORT_B64 bytes). Returns its length (0: none). */
size_t sluice__load_report(sluice__load *l, int in_flight, char *out);

#endif
