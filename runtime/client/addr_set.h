/* A channel's subchannel set against a new resolution: which addresses
 * stay and which are new, by name, in O(n log n) (a sort and binary
 * searches) instead of comparing every pair -- 10,000 addresses were
 * 10^8 comparisons at every re-resolution of a dns: name. Pure: no I/O. */
#ifndef SLUICE_CLIENT_ADDR_SET_H
#define SLUICE_CLIENT_ADDR_SET_H

#include <stddef.h>

#include "transport/addr.h"

/* old[0..n_old): the names the channel has (distinct); addrs[0..n): the
 * resolution (names may repeat). Sets keep[i] = 1 when old[i] is among
 * addrs (else 0), and add[j] = 1 for the first addrs[j] of each name that
 * is not among old (else 0): the channel keeps its subchannels in their
 * order and appends the new ones in the resolution's order, as the
 * pairwise comparison did. Returns 0, or -1 without memory (nothing
 * set). */
int sluice__addr_set_diff(const char *const *old, size_t n_old,
                          const sluice__addr *addrs, size_t n,
                          unsigned char *keep, unsigned char *add);

#endif
