/** @file
 * sluice: the clock of deadlines.
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include "sluice/export.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Monotonic clock in nanoseconds (CLOCK_MONOTONIC), the clock of every
 * absolute deadline in the API (sluice_call_opts::deadline_ns,
 * sluice_server_call_deadline()). Thread-safe.
 * @return the current time in ns since an arbitrary fixed point. */
SLUICE_API uint64_t sluice_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
