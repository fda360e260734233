/* sluice: call metadata (custom HTTP/2 headers and trailers).
 *
 * Keys are lowercase [0-9a-z_.-]+ and must not start with "grpc-". A key that
 * ends in "-bin" carries arbitrary bytes, base64-encoded on the wire by the
 * library; other values must be printable ASCII (0x20..0x7E).
 *
 * A metadata list is not thread-safe; one thread at a time.
 */
#ifndef SLUICE_METADATA_H
#define SLUICE_METADATA_H

#include "sluice/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_metadata sluice_metadata;

/* Creates an empty list in *out. The caller owns it and frees it with
 * sluice_metadata_del(). Returns 0, SLUICE_ERR_INVALID_ARG (out NULL) or
 * SLUICE_ERR_NOMEM; *out is untouched on failure. */
SLUICE_API int sluice_metadata_new(sluice_metadata **out);

/* Frees the list and every entry. NULL is ignored. */
SLUICE_API void sluice_metadata_del(sluice_metadata *md);

/* Appends key/value; both are copied. value may hold any bytes for "-bin"
 * keys. Returns 0, SLUICE_ERR_INVALID_ARG (md or key NULL, or value NULL
 * with value_len > 0), SLUICE_ERR_BAD_METADATA (a key that is not lowercase
 * [0-9a-z_.-]+, a reserved "grpc-" key, or a non-printable value for an
 * ASCII key: nothing appended) or SLUICE_ERR_NOMEM. */
SLUICE_API int sluice_metadata_add(sluice_metadata *md, const char *key,
                                   const void *value, size_t value_len);

/* Appends key with a NUL-terminated string value; see sluice_metadata_add. */
SLUICE_API int sluice_metadata_add_str(sluice_metadata *md, const char *key,
                                       const char *value);

/* Number of entries; 0 for NULL. */
SLUICE_API size_t sluice_metadata_count(const sluice_metadata *md);

/* Entry i (0-based) in insertion order. *key and *value are borrowed from the
 * list (valid until it is changed or freed); values are NUL-terminated for
 * convenience, *value_len excludes the NUL. Returns 0 or
 * SLUICE_ERR_INVALID_ARG when i is out of range or a pointer is NULL. */
SLUICE_API int sluice_metadata_get(const sluice_metadata *md, size_t i,
                                   const char **key, const void **value,
                                   size_t *value_len);

/* First entry whose key equals key (keys are compared exactly; they are
 * always lowercase). Returns the value (borrowed, NUL-terminated) and its
 * length in *value_len (may be NULL), or NULL when absent. */
SLUICE_API const char *sluice_metadata_find(const sluice_metadata *md,
                                            const char *key, size_t *value_len);

#ifdef __cplusplus
}
#endif
#endif
