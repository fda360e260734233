/* echo_server --raw: bench.Echo as a raw service (sluice/buf.h). */
#ifndef SLUICE_BENCH_ECHO_RAW_H
#define SLUICE_BENCH_ECHO_RAW_H

#include <sluice/sluice.h>

/* Registers every method of bench.Echo on srv as raw. Returns 0 or a
 * SLUICE_ERR_* code. */
int echo_raw_register(sluice_server *srv);

#endif
