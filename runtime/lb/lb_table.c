/* The balancer's table: destinations, compact records, heaps (see
 * lb_table.h). */
#include "lb/lb_table.h"

#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

void sluice__lb_free(sluice__lb *lb) {
  free(lb->eject_heap);
  free(lb->down_heap);
  lb->eject_heap = NULL;
  lb->down_heap = NULL;
  lb->eject_n = lb->down_n = lb->down_cap = 0;
  lb->p_n = 0;
  lb->p_in_flight = 0;
  lb->p_limit = 0;
  lb->down_scan = 0;
  free(lb->dests);
  free(lb->hot);
  free(lb->hot_path[0]);
  lb->dests = NULL;
  lb->hot = NULL;
  memset(lb->hot_path, 0, sizeof lb->hot_path);
  lb->n = lb->n_cap = 0;
  lb->n_usable = lb->n_ejected = lb->n_usable_ejected = 0;
  lb->skip_ejected = 0;
}

/* --- the compact records (lb.h, sluice__lb_hot) ---------------------------
 *
 * A pick reads lb->hot[i] and lb->hot_path[p][i] only; the one function
 * that writes them is sluice__lb_sync, which copies them from the destination
 * after each event that may change them: dest_init/reset, restart (the end
 * of an ejection), eject, sent, unsent, complete, peer report, the
 * channel's usable flag, a new table, and sluice__lb_dest_changed for
 * whoever writes a destination's fields directly. Debug builds check the
 * chosen destination's records against a fresh copy at every pick. */

/* sluice__lb_sync's path argument besides a path: all of them, or none (an
 * event that changes no per-path field). */
#define SLUICE__LB_SYNC_ALL UINT32_MAX
#define SLUICE__LB_SYNC_NO_PATH (UINT32_MAX - 1)

void sluice__lb_fill_hot(const sluice__lb *lb, const sluice__lb_dest *d,
                         sluice__lb_hot *h) {
  const sluice__lb_est *e = &d->est;
  h->usable = d->usable != 0;
  h->ejected = d->stats.outlier.ejected != 0;
  h->evidence = e->samples >= SLUICE__LB_MIN_SAMPLES;
  h->in_flight = e->in_flight;
  h->limit = d->limit;
  h->demoted_until_ns =
      lb && lb->ops->demoted_until ? lb->ops->demoted_until(lb, d) : 0;
  h->rate_calls = e->rate_calls;
  h->lat_ewma_ns = e->lat_ewma_ns;
  h->lat_min_ns = e->lat_min_ns;
}

void sluice__lb_fill_hot_path(const sluice__lb_dest *d, uint32_t p,
                              sluice__lb_hot_path *hp) {
  hp->in_flight = d->est.path_in_flight[p];
  hp->lat_ewma_ns = d->est.path_lat_ewma_ns[p];
  hp->lat_min_ns = d->est.path_lat_min_ns[p];
}

/* d's index in the table, or SLUICE__LB_NO_SLOT when it is in none (not
 * yet, or removed since: its slot is stale). */
uint32_t sluice__lb_slot(const sluice__lb *lb, const sluice__lb_dest *d) {
  uint32_t i = d->slot;
  return i < lb->n && lb->dests[i] == d ? i : SLUICE__LB_NO_SLOT;
}

/* Adds (sign 1) or takes out (-1) what h counts for: the table's counts
 * and the pressure's sums (sluice__lb_pressure_sample). */
static void count_hot(sluice__lb *lb, const sluice__lb_hot *h, int sign) {
  size_t k = sign > 0 ? 1 : (size_t)-1; /* wraps: a subtraction */
  if (h->usable)
    lb->n_usable += k;
  if (h->ejected)
    lb->n_ejected += k;
  if (h->usable && h->ejected)
    lb->n_usable_ejected += k;
  if (h->usable && h->limit > 0) {
    lb->p_n += k;
    lb->p_in_flight += sign > 0 ? h->in_flight : -(uint64_t)h->in_flight;
    lb->p_limit += sign > 0 ? h->limit : -h->limit;
    if (!lb->p_n)
      lb->p_limit = 0; /* exactly: no rounding residue divides a sample */
  }
}

/* The pressure's limit sum from scratch (see sluice__lb.p_changes). */
double sluice__lb_sum_limits(const sluice__lb *lb) {
  double sum = 0;
  for (size_t i = 0; i < lb->n; i++)
    if (lb->hot[i].usable && lb->hot[i].limit > 0)
      sum += lb->hot[i].limit;
  return sum;
}

void sluice__lb_sync(sluice__lb *lb, const sluice__lb_dest *d, uint32_t path) {
  uint32_t i = sluice__lb_slot(lb, d);
  if (i == SLUICE__LB_NO_SLOT)
    return;
  sluice__lb_hot *h = &lb->hot[i];
  count_hot(lb, h, -1);
  sluice__lb_fill_hot(lb, d, h);
  count_hot(lb, h, 1);
  lb->skip_ejected = lb->n_usable_ejected < lb->n_usable;
  if (++lb->p_changes >= SLUICE__LB_RESUM) {
    lb->p_changes = 0;
    lb->p_limit = sluice__lb_sum_limits(lb);
  }
  if (path == SLUICE__LB_SYNC_ALL) {
    for (uint32_t p = 0; p < SLUICE__LB_MAX_PATHS; p++)
      sluice__lb_fill_hot_path(d, p, &lb->hot_path[p][i]);
  } else if (path < SLUICE__LB_MAX_PATHS) {
    sluice__lb_fill_hot_path(d, path, &lb->hot_path[path][i]);
  }
}

/* --- heaps: the ends of ejections (min), downstream reports (max) ------- */

void sluice__lb_eject_push(sluice__lb *lb, uint64_t until, uint32_t slot) {
  struct sluice__lb_eject_end *h = lb->eject_heap;
  if (lb->eject_n >= lb->n_cap)
    return; /* cannot happen: one entry per ejected destination */
  size_t i = lb->eject_n++;
  while (i) {
    size_t up = (i - 1) / 2;
    if (h[up].until_ns <= until)
      break;
    h[i] = h[up];
    i = up;
  }
  h[i].until_ns = until;
  h[i].slot = slot;
}

void sluice__lb_eject_pop(sluice__lb *lb) {
  struct sluice__lb_eject_end *h = lb->eject_heap;
  size_t n = --lb->eject_n, i = 0;
  if (!n)
    return;
  struct sluice__lb_eject_end last = h[n];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && h[c + 1].until_ns < h[c].until_ns)
      c++;
    if (h[c].until_ns >= last.until_ns)
      break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
}

int sluice__lb_down_push(sluice__lb *lb, double down, uint64_t ns,
                         uint32_t slot) {
  if (lb->down_n == lb->down_cap) {
    size_t cap = lb->down_cap ? 2 * lb->down_cap : 16;
    struct sluice__lb_down *v = sluice__realloc(lb->down_heap, cap * sizeof *v);
    if (!v) {
      lb->down_scan = 1;
      return -1;
    }
    lb->down_heap = v;
    lb->down_cap = cap;
  }
  struct sluice__lb_down *h = lb->down_heap;
  size_t i = lb->down_n++;
  while (i) {
    size_t up = (i - 1) / 2;
    if (h[up].down >= down)
      break;
    h[i] = h[up];
    i = up;
  }
  h[i].down = down;
  h[i].ns = ns;
  h[i].slot = slot;
  return 0;
}

void sluice__lb_down_pop(sluice__lb *lb) {
  struct sluice__lb_down *h = lb->down_heap;
  size_t n = --lb->down_n, i = 0;
  if (!n)
    return;
  struct sluice__lb_down last = h[n];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && h[c + 1].down > h[c].down)
      c++;
    if (h[c].down <= last.down)
      break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
}

/* One entry per table destination with a report (> 0): after a new table,
 * or when superseded and stale entries pile up. */
void sluice__lb_down_rebuild(sluice__lb *lb) {
  lb->down_n = 0;
  lb->down_scan = 0;
  for (size_t i = 0; i < lb->n; i++) {
    const sluice__lb_est *e = &lb->dests[i]->est;
    if (e->peer_down > 0)
      sluice__lb_down_push(lb, e->peer_down, e->peer_load_ns, (uint32_t)i);
  }
}

/* The records' alignment (lb.h): a record read is one line. */
#define HOT_ALIGN 64
_Static_assert(sizeof(sluice__lb_hot) == 64 &&
                   sizeof(sluice__lb_hot_path) == 32,
               "a record per cache line, two per-path records per line");

int sluice__lb_set_dests(sluice__lb *lb, sluice__lb_dest *const *dests,
                         size_t n) {
  lb->gen++; /* indexes moved */
  if (n > lb->n_cap || !lb->hot) {
    size_t cap = n > 4 ? n : 4;
    sluice__lb_dest **v = sluice__malloc(cap * sizeof *v);
    /* aligned_alloc wants a multiple of the alignment. */
    size_t hs = cap * sizeof(sluice__lb_hot);
    size_t ps = SLUICE__LB_MAX_PATHS * cap * sizeof(sluice__lb_hot_path);
    sluice__lb_hot *h =
        aligned_alloc(HOT_ALIGN, (hs + HOT_ALIGN - 1) / HOT_ALIGN * HOT_ALIGN);
    sluice__lb_hot_path *hp =
        aligned_alloc(HOT_ALIGN, (ps + HOT_ALIGN - 1) / HOT_ALIGN * HOT_ALIGN);
    struct sluice__lb_eject_end *eh = sluice__malloc(cap * sizeof *eh);
    if (!v || !h || !hp || !eh) {
      free(v);
      free(h);
      free(hp);
      free(eh);
      sluice__lb_free(lb);
      return -1;
    }
    sluice__lb_free(lb);
    lb->dests = v;
    lb->hot = h;
    lb->eject_heap = eh;
    for (size_t p = 0; p < SLUICE__LB_MAX_PATHS; p++)
      lb->hot_path[p] = hp + p * cap;
    lb->n_cap = cap;
  }
  lb->n = n;
  lb->n_usable = lb->n_ejected = lb->n_usable_ejected = 0;
  lb->p_n = 0;
  lb->p_in_flight = 0;
  lb->p_limit = 0;
  lb->eject_n = 0;
  for (size_t i = 0; i < n; i++) {
    lb->dests[i] = dests[i];
    dests[i]->slot = (uint32_t)i;
    memset(&lb->hot[i], 0, sizeof lb->hot[i]);
  }
  for (size_t i = 0; i < n; i++) {
    const sluice__lb_outlier *o = &dests[i]->stats.outlier;
    sluice__lb_sync(lb, dests[i], SLUICE__LB_SYNC_ALL);
    if (o->ejected)
      sluice__lb_eject_push(lb, o->ejected_until_ns, (uint32_t)i);
  }
  lb->skip_ejected = lb->n_usable_ejected < lb->n_usable;
  lb->p_limit = sluice__lb_sum_limits(lb);
  lb->p_changes = 0;
  sluice__lb_down_rebuild(lb);
  return 0;
}

void sluice__lb_set_usable(sluice__lb *lb, sluice__lb_dest *d, int usable) {
  d->usable = usable;
  lb->gen++; /* a remembered saturation is stale */
  sluice__lb_sync(lb, d, SLUICE__LB_SYNC_NO_PATH);
}

void sluice__lb_dest_changed(sluice__lb *lb, sluice__lb_dest *d) {
  lb->gen++;
  sluice__lb_sync(lb, d, SLUICE__LB_SYNC_ALL);
}

int sluice__lb_records_ok(const sluice__lb *lb) {
  size_t usable = 0, ejected = 0, both = 0, p_n = 0;
  uint64_t p_in_flight = 0;
  for (size_t i = 0; i < lb->n; i++) {
    const sluice__lb_dest *d = lb->dests[i];
    if (d->slot != i)
      return 0;
    sluice__lb_hot h;
    sluice__lb_fill_hot(lb, d, &h);
    const sluice__lb_hot *r = &lb->hot[i];
    if (h.usable != r->usable || h.ejected != r->ejected ||
        h.evidence != r->evidence || h.in_flight != r->in_flight ||
        h.limit != r->limit || h.demoted_until_ns != r->demoted_until_ns ||
        h.rate_calls != r->rate_calls || h.lat_ewma_ns != r->lat_ewma_ns ||
        h.lat_min_ns != r->lat_min_ns)
      return 0;
    for (uint32_t p = 0; p < SLUICE__LB_MAX_PATHS; p++) {
      sluice__lb_hot_path hp;
      const sluice__lb_hot_path *rp = &lb->hot_path[p][i];
      sluice__lb_fill_hot_path(d, p, &hp);
      if (hp.in_flight != rp->in_flight || hp.lat_ewma_ns != rp->lat_ewma_ns ||
          hp.lat_min_ns != rp->lat_min_ns)
        return 0;
    }
    usable += h.usable;
    ejected += h.ejected;
    both += h.usable && h.ejected;
    if (h.usable && h.limit > 0) {
      p_n++;
      p_in_flight += h.in_flight;
    }
  }
  double limit = sluice__lb_sum_limits(lb), err = lb->p_limit - limit;
  return usable == lb->n_usable && ejected == lb->n_ejected &&
         both == lb->n_usable_ejected && lb->eject_n == lb->n_ejected &&
         lb->skip_ejected == (both < usable) && p_n == lb->p_n &&
         p_in_flight == lb->p_in_flight &&
         (err < 0 ? -err : err) <= 1e-9 * (limit > 1 ? limit : 1);
}