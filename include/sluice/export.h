/** @file
 * sluice: the marker of the public API.
 *
 * libsluice is built with hidden visibility: only declarations marked
 * SLUICE_API are exported from the shared library, so internal `sluice__*`
 * symbols cannot collide with an application's or become part of the ABI.
 */
#ifndef SLUICE_EXPORT_H
#define SLUICE_EXPORT_H

/** Marks a declaration as part of the public API: default visibility,
 * exported from libsluice.so (empty on compilers without visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

#endif
