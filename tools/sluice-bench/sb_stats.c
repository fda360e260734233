/* Statistics (see sb_stats.h). */
#include "sb_stats.h"

#include <math.h>
#include <string.h>

#include "sluice/status.h"

void sb_welford_init(sb_welford *w) { memset(w, 0, sizeof *w); }

void sb_welford_add(sb_welford *w, double x) {
  w->n++;
  double d = x - w->mean;
  w->mean += d / (double)w->n;
  w->m2 += d * (x - w->mean);
}

void sb_welford_merge(sb_welford *dst, const sb_welford *src) {
  if (src->n == 0)
    return;
  if (dst->n == 0) {
    *dst = *src;
    return;
  }
  double na = (double)dst->n, nb = (double)src->n, n = na + nb;
  double d = src->mean - dst->mean;
  dst->mean += d * nb / n;
  dst->m2 += src->m2 + d * d * na * nb / n;
  dst->n += src->n;
}

double sb_welford_stddev(const sb_welford *w) {
  return w->n > 1 ? sqrt(w->m2 / (double)(w->n - 1)) : 0.0;
}

sb_kind sb_classify(int code, const char *message) {
  int local = message && strstr(message, "dropped locally") != NULL;
  if (code == SLUICE_STATUS_RESOURCE_EXHAUSTED && local)
    return SB_KIND_EARLY_DROP;
  if (code == SLUICE_STATUS_RESOURCE_EXHAUSTED && message &&
      strstr(message, "circuit breaker") != NULL)
    return SB_KIND_BREAKER;
  if (code == SLUICE_STATUS_DEADLINE_EXCEEDED)
    return local ? SB_KIND_DEADLINE_REFUSAL : SB_KIND_TIMEOUT;
  return SB_KIND_OTHER;
}

const char *sb_kind_name(sb_kind k) {
  static const char *const names[SB_N_KINDS] = {
      "early_drop", "deadline_refusal", "timeout", "other", "breaker"};
  return (unsigned)k < SB_N_KINDS ? names[k] : "other";
}

void sb_stats_init(sb_stats *s) {
  memset(s, 0, sizeof *s);
  sluice__histogram_init(&s->hist);
  sb_welford_init(&s->lat);
  for (int k = 0; k < SB_N_KINDS; k++)
    sluice__histogram_init(&s->kind_hist[k]);
}

void sb_stats_record_status(sb_stats *s, int code, const char *message,
                            uint64_t latency_ns) {
  if (code == 0) {
    s->ok++;
    sluice__histogram_record(&s->hist, latency_ns);
    sb_welford_add(&s->lat, (double)latency_ns);
    return;
  }
  s->by_code[code > 0 && code < SB_N_CODES ? code : SB_N_CODES]++;
  sluice__histogram_record(&s->kind_hist[sb_classify(code, message)],
                           latency_ns);
}

void sb_stats_record(sb_stats *s, int code, uint64_t latency_ns) {
  sb_stats_record_status(s, code, NULL, latency_ns);
}

void sb_stats_merge(sb_stats *dst, const sb_stats *src) {
  sluice__histogram_merge(&dst->hist, &src->hist);
  for (int k = 0; k < SB_N_KINDS; k++)
    sluice__histogram_merge(&dst->kind_hist[k], &src->kind_hist[k]);
  sb_welford_merge(&dst->lat, &src->lat);
  dst->ok += src->ok;
  for (int i = 0; i <= SB_N_CODES; i++)
    dst->by_code[i] += src->by_code[i];
}

uint64_t sb_stats_errors(const sb_stats *s) {
  uint64_t n = 0;
  for (int i = 0; i <= SB_N_CODES; i++)
    n += s->by_code[i];
  return n;
}
