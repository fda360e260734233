/* The balancer's table (lb/lb_table.c): the destinations picks choose
 * among, their compact records (sluice__lb_hot, lb.h) with the counts and
 * pressure sums kept from them, and the two heaps indexed by table slot
 * (ends of ejections, downstream reports). Internal to lb/: the channel
 * sees sluice__lb_set_dests, _set_usable, _dest_changed, _records_ok and
 * _free (lb.h); lb.c's events write the records through sluice__lb_sync.
 * Loop thread, as the rest of lb/. */
#ifndef SLUICE_LB_LB_TABLE_H
#define SLUICE_LB_LB_TABLE_H

#include <stdint.h>

#include "lb/lb.h"

/* sluice__lb_sync's path argument besides a path: all of them, or none (an
 * event that changes no per-path field). */
#define SLUICE__LB_SYNC_ALL UINT32_MAX
#define SLUICE__LB_SYNC_NO_PATH (UINT32_MAX - 1)

/* Writes d's record (and its path's, see above) anew from d, and the
 * counts and sums kept from the records: after every event that may change
 * a field the record copies. Nothing when d is in no table. */
void sluice__lb_sync(sluice__lb *lb, const sluice__lb_dest *d, uint32_t path);

/* d's index in the table, or SLUICE__LB_NO_SLOT when it is in none (not
 * yet, or removed since: its slot is stale). */
uint32_t sluice__lb_slot(const sluice__lb *lb, const sluice__lb_dest *d);

/* A fresh copy of d's record (lb NULL: demoted_until left 0, for the
 * checks that do not rank) and of its record for path p. */
void sluice__lb_fill_hot(const sluice__lb *lb, const sluice__lb_dest *d,
                         sluice__lb_hot *h);
void sluice__lb_fill_hot_path(const sluice__lb_dest *d, uint32_t p,
                              sluice__lb_hot_path *hp);

/* The sum of the usable destinations' limits, from scratch (O(n)). */
double sluice__lb_sum_limits(const sluice__lb *lb);

/* The min-heap of ejection ends (sluice__lb.eject_heap): push one for the
 * destination at slot, pop the earliest. */
void sluice__lb_eject_push(sluice__lb *lb, uint64_t until, uint32_t slot);
void sluice__lb_eject_pop(sluice__lb *lb);

/* The max-heap of downstream reports (sluice__lb.down_heap): push one
 * (-1 without memory: sluice__lb.down_scan is then set), pop the largest,
 * rebuild from the table's destinations. */
int sluice__lb_down_push(sluice__lb *lb, double down, uint64_t ns,
                         uint32_t slot);
void sluice__lb_down_pop(sluice__lb *lb);
void sluice__lb_down_rebuild(sluice__lb *lb);

#endif
