/* sluice: the marker of the public API.
 *
 * libsluice is built with hidden visibility: only declarations marked
 * SLUICE_API are exported from the shared library, so internal sluice__*
 * symbols cannot collide with an application's or become part of the ABI.
 */
#ifndef SLUICE_EXPORT_H
#define SLUICE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

#endif
