#include <uv.h>

#include "sluice/clock.h"

/* uv_hrtime is CLOCK_MONOTONIC: deadlines must not jump with wall-clock
 * changes. */
uint64_t sluice_now_ns(void) { return uv_hrtime(); }
