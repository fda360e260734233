/* Library-internal access to metadata lists. */
#ifndef SLUICE_WIRE_METADATA_INTERNAL_H
#define SLUICE_WIRE_METADATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <sluice/metadata.h>

/* One entry. key and value are stored together (in the list's inline
 * arena, or in one allocation owned by key); value is NUL-terminated and len
 * excludes the NUL. */
typedef struct sluice__md_entry {
  char *key;
  char *value;
  size_t len;
} sluice__md_entry;

/* The first few entries and their bytes live inside the list itself, so
 * a call's usual handful of headers (user-agent, grpc-accept-encoding ...)
 * costs no allocation beyond the list's own. */
#define SLUICE__MD_INLINE_ENTRIES 6
#define SLUICE__MD_INLINE_BYTES 256

struct sluice_metadata {
  sluice__md_entry *entries; /* inline_entries, or a heap array */
  size_t count;
  size_t cap;
  size_t arena_used; /* bytes of arena taken */
  sluice__md_entry inline_entries[SLUICE__MD_INLINE_ENTRIES];
  char arena[SLUICE__MD_INLINE_BYTES];
};

/* Empties md for reuse (a server connection's list for each request's
 * headers): entries beyond the inline ones keep their grown array. */
void sluice__metadata_clear(sluice_metadata *md);

/* Appends without any validation; for headers the library itself sends
 * (grpc-retry-pushback-ms ...). Both are copied. Returns 0 or
 * SLUICE_ERR_NOMEM. */
int sluice__metadata_append(sluice_metadata *md, const char *key, size_t klen,
                            const void *value, size_t vlen);

/* Appends a header as received from the wire. A "-bin" value is split on ','
 * (duplicates may arrive joined), and each part is base64-decoded (padded or
 * not, spaces around parts ignored) into its own entry. A header whose key is
 * not [0-9a-z_.-]+ (a leading ':' allowed), whose ASCII value is not
 * printable or whose binary value is not base64 is dropped: the call returns
 * 0 and adds nothing. Reserved names are not filtered here; see
 * sluice__md_is_reserved(). Returns 0, SLUICE_ERR_INVALID_ARG (NULL pointer)
 * or SLUICE_ERR_NOMEM (nothing added). */
int sluice__metadata_add_received(sluice_metadata *md, const char *key,
                                  size_t klen, const uint8_t *value,
                                  size_t vlen);

#endif
