/** @file
 * sluice: the library's version, at compile time and at run time.
 */
#ifndef SLUICE_VERSION_H
#define SLUICE_VERSION_H

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version these headers belong to (semantic versioning; before 1.0 a
 * new minor version may change the API). The build reads the version from
 * these three lines: change them, nothing else, to release. */
/** Major version of these headers (semantic versioning). */
#define SLUICE_VERSION_MAJOR 0
/** Minor version of these headers; before 1.0 a new one may change the API.
 */
#define SLUICE_VERSION_MINOR 3
/** Patch version of these headers. */
#define SLUICE_VERSION_PATCH 2

/** The ABI version: the number in the shared library's SONAME
 * (libsluice.so.0). It grows with every release that breaks binary
 * compatibility, independent of the version above (docs/abi.md). */
#define SLUICE_ABI_VERSION 1

/** The version as one number, (major << 16) | (minor << 8) | patch, for
 * compile-time comparisons: `#if SLUICE_VERSION_HEX >= 0x000300`. */
#define SLUICE_VERSION_HEX                                                     \
  ((SLUICE_VERSION_MAJOR << 16) | (SLUICE_VERSION_MINOR << 8) |                \
   SLUICE_VERSION_PATCH)

/** The version of the library linked at run time, as "0.3.0". Compare it
 * with SLUICE_VERSION_HEX through sluice_version_hex() to detect a program
 * running against another build than it was compiled with. Thread-safe.
 * @return a static string, never NULL. */
SLUICE_API const char *sluice_version(void);

/** The run-time library's version as SLUICE_VERSION_HEX computes it.
 * Thread-safe.
 * @return (major << 16) | (minor << 8) | patch of the linked library. */
SLUICE_API unsigned sluice_version_hex(void);

#ifdef __cplusplus
}
#endif
#endif
