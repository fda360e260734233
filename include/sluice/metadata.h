/** @file
 * sluice: call metadata (custom HTTP/2 headers and trailers).
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

/** A list of metadata entries (opaque): key/value pairs in insertion
 * order; a key may repeat. */
typedef struct sluice_metadata sluice_metadata;

/** Creates an empty list in *out. The caller owns it and frees it with
 * sluice_metadata_del().
 * @param[out] out receives the list; untouched on failure
 * @retval 0 created
 * @retval SLUICE_ERR_INVALID_ARG out is NULL
 * @retval SLUICE_ERR_NOMEM out of memory */
SLUICE_API int sluice_metadata_new(sluice_metadata **out);

/** Frees the list and every entry.
 * @param md the list; NULL is ignored */
SLUICE_API void sluice_metadata_del(sluice_metadata *md);

/** Appends key/value; both are copied. value may hold any bytes for "-bin"
 * keys.
 * @param md the list
 * @param key the key, NUL-terminated
 * @param value the value's bytes (may be NULL when value_len is 0)
 * @param value_len the value's length in bytes
 * @retval 0 appended
 * @retval SLUICE_ERR_INVALID_ARG md or key NULL, or value NULL with
 *   value_len > 0; nothing appended
 * @retval SLUICE_ERR_BAD_METADATA a key that is not lowercase
 *   [0-9a-z_.-]+, a reserved "grpc-" key, or a non-printable value for an
 *   ASCII (not "-bin") key; nothing appended
 * @retval SLUICE_ERR_NOMEM out of memory; nothing appended */
SLUICE_API int sluice_metadata_add(sluice_metadata *md, const char *key,
                                   const void *value, size_t value_len);

/** Appends key with a NUL-terminated string value; see
 * sluice_metadata_add().
 * @param md the list
 * @param key the key, NUL-terminated
 * @param value the value, NUL-terminated (not NULL)
 * @return as sluice_metadata_add(); SLUICE_ERR_INVALID_ARG also for a NULL
 *   value */
SLUICE_API int sluice_metadata_add_str(sluice_metadata *md, const char *key,
                                       const char *value);

/** Number of entries.
 * @param md the list
 * @return the number of entries; 0 for NULL */
SLUICE_API size_t sluice_metadata_count(const sluice_metadata *md);

/** Entry i (0-based) in insertion order. *key and *value are borrowed from
 * the list (valid until it is changed or freed); values are NUL-terminated
 * for convenience, *value_len excludes the NUL.
 * @param md the list
 * @param i the entry's index, below sluice_metadata_count()
 * @param[out] key receives the key
 * @param[out] value receives the value's bytes
 * @param[out] value_len receives the value's length
 * @retval 0 found
 * @retval SLUICE_ERR_INVALID_ARG i is out of range or a pointer is NULL;
 *   nothing is written */
SLUICE_API int sluice_metadata_get(const sluice_metadata *md, size_t i,
                                   const char **key, const void **value,
                                   size_t *value_len);

/** First entry whose key equals key (keys are compared exactly; they are
 * always lowercase).
 * @param md the list
 * @param key the key to look for
 * @param[out] value_len receives the value's length when found; may be NULL
 * @return the value (borrowed, NUL-terminated: valid until the list is
 *   changed or freed), or NULL when absent or md or key is NULL */
SLUICE_API const char *sluice_metadata_find(const sluice_metadata *md,
                                            const char *key, size_t *value_len);

#ifdef __cplusplus
}
#endif
#endif
