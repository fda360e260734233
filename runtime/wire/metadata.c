/* Metadata lists: the public API and the receiving side's append. */
#include "wire/base64.h"
#include "wire/metadata_internal.h"
#include "wire/metadata_rules.h"

#include <sluice/status.h>

#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

int sluice_metadata_new(sluice_metadata **out) {
  if (out == NULL)
    return SLUICE_ERR_INVALID_ARG;
  /* Not zeroed whole: the arena needs no clearing. */
  sluice_metadata *md = sluice__malloc(sizeof *md);
  if (md == NULL)
    return SLUICE_ERR_NOMEM;
  md->entries = md->inline_entries;
  md->count = 0;
  md->cap = SLUICE__MD_INLINE_ENTRIES;
  md->arena_used = 0;
  *out = md;
  return 0;
}

static int in_arena(const sluice_metadata *md, const char *p) {
  return p >= md->arena && p < md->arena + sizeof md->arena;
}

/* Frees entry i's bytes unless they are in the arena. */
static void entry_free(sluice_metadata *md, size_t i) {
  if (!in_arena(md, md->entries[i].key))
    free(md->entries[i].key);
}

void sluice_metadata_del(sluice_metadata *md) {
  if (md == NULL)
    return;
  for (size_t i = 0; i < md->count; i++)
    entry_free(md, i);
  if (md->entries != md->inline_entries)
    free(md->entries);
  free(md);
}

void sluice__metadata_clear(sluice_metadata *md) {
  for (size_t i = 0; i < md->count; i++)
    entry_free(md, i);
  md->count = 0;
  md->arena_used = 0;
}

int sluice__metadata_append(sluice_metadata *md, const char *key, size_t klen,
                            const void *value, size_t vlen) {
  if (md->count == md->cap) {
    size_t cap = md->cap * 2;
    sluice__md_entry *e = sluice__malloc(cap * sizeof *e);
    if (e == NULL)
      return SLUICE_ERR_NOMEM;
    memcpy(e, md->entries, md->count * sizeof *e);
    if (md->entries != md->inline_entries)
      free(md->entries);
    md->entries = e;
    md->cap = cap;
  }
  if (klen > SIZE_MAX - vlen - 2)
    return SLUICE_ERR_NOMEM;
  size_t need = klen + vlen + 2;
  char *block;
  if (need <= sizeof md->arena - md->arena_used) {
    block = md->arena + md->arena_used;
    md->arena_used += need;
  } else if ((block = sluice__malloc(need)) == NULL) {
    return SLUICE_ERR_NOMEM;
  }
  memcpy(block, key, klen);
  block[klen] = '\0';
  if (vlen > 0)
    memcpy(block + klen + 1, value, vlen);
  block[klen + 1 + vlen] = '\0';
  md->entries[md->count++] =
      (sluice__md_entry){.key = block, .value = block + klen + 1, .len = vlen};
  return 0;
}

int sluice_metadata_add(sluice_metadata *md, const char *key, const void *value,
                        size_t value_len) {
  if (md == NULL || key == NULL || (value == NULL && value_len > 0))
    return SLUICE_ERR_INVALID_ARG;
  /* A key or value against gRPC's rules is not a NULL: its own error, whose
   * text states the rules. */
  size_t klen = strlen(key);
  if (!sluice__md_key_valid(key, klen) ||
      (klen >= 5 && memcmp(key, "grpc-", 5) == 0))
    return SLUICE_ERR_BAD_METADATA;
  if (!sluice__md_is_bin(key, klen) &&
      !sluice__md_ascii_value_valid(value, value_len))
    return SLUICE_ERR_BAD_METADATA;
  return sluice__metadata_append(md, key, klen, value, value_len);
}

int sluice_metadata_add_str(sluice_metadata *md, const char *key,
                            const char *value) {
  if (value == NULL)
    return SLUICE_ERR_INVALID_ARG;
  return sluice_metadata_add(md, key, value, strlen(value));
}

size_t sluice_metadata_count(const sluice_metadata *md) {
  return md == NULL ? 0 : md->count;
}

int sluice_metadata_get(const sluice_metadata *md, size_t i, const char **key,
                        const void **value, size_t *value_len) {
  if (md == NULL || key == NULL || value == NULL || value_len == NULL ||
      i >= md->count)
    return SLUICE_ERR_INVALID_ARG;
  *key = md->entries[i].key;
  *value = md->entries[i].value;
  *value_len = md->entries[i].len;
  return 0;
}

const char *sluice_metadata_find(const sluice_metadata *md, const char *key,
                                 size_t *value_len) {
  if (md == NULL || key == NULL)
    return NULL;
  for (size_t i = 0; i < md->count; i++) {
    if (strcmp(md->entries[i].key, key) == 0) {
      if (value_len != NULL)
        *value_len = md->entries[i].len;
      return md->entries[i].value;
    }
  }
  return NULL;
}

static int received_key_valid(const char *key, size_t klen) {
  if (klen > 0 && key[0] == ':')
    return sluice__md_key_valid(key + 1, klen - 1);
  return sluice__md_key_valid(key, klen);
}

static int is_ows(char c) { return c == ' ' || c == '\t'; }

/* Calls fn for each comma-separated part of a -bin value, trimmed of
 * surrounding spaces, decoded into scratch. Stops at the first non-zero
 * return of fn; returns it, or -1 when a part is not base64. */
static int each_bin_part(const char *v, size_t vlen, uint8_t *scratch,
                         int (*fn)(void *, const uint8_t *, size_t),
                         void *arg) {
  size_t start = 0;
  for (;;) {
    size_t end = start;
    while (end < vlen && v[end] != ',')
      end++;
    size_t a = start, b = end;
    while (a < b && is_ows(v[a]))
      a++;
    while (b > a && is_ows(v[b - 1]))
      b--;
    size_t n;
    if (sluice__base64_decode(v + a, b - a, scratch, &n) != 0)
      return -1;
    int rc = fn(arg, scratch, n);
    if (rc != 0)
      return rc;
    if (end == vlen)
      return 0;
    start = end + 1;
  }
}

static int ignore_part(void *arg, const uint8_t *p, size_t n) {
  (void)arg;
  (void)p;
  (void)n;
  return 0;
}

struct append_ctx {
  sluice_metadata *md;
  const char *key;
  size_t klen;
};

static int append_part(void *arg, const uint8_t *p, size_t n) {
  struct append_ctx *c = arg;
  return sluice__metadata_append(c->md, c->key, c->klen, p, n);
}

int sluice__metadata_add_received(sluice_metadata *md, const char *key,
                                  size_t klen, const uint8_t *value,
                                  size_t vlen) {
  if (md == NULL || key == NULL || (value == NULL && vlen > 0))
    return SLUICE_ERR_INVALID_ARG;
  if (!received_key_valid(key, klen))
    return 0;
  if (!sluice__md_is_bin(key, klen)) {
    if (!sluice__md_ascii_value_valid(value, vlen))
      return 0;
    return sluice__metadata_append(md, key, klen, value, vlen);
  }

  /* Every part is at most vlen characters long, so one scratch buffer does. */
  uint8_t small[256];
  uint8_t *scratch = small;
  if (SLUICE__BASE64_DECODED_MAX(vlen) > sizeof small) {
    scratch = sluice__malloc(SLUICE__BASE64_DECODED_MAX(vlen));
    if (scratch == NULL)
      return SLUICE_ERR_NOMEM;
  }
  const char *v = vlen > 0 ? (const char *)value : "";
  /* Validate every part before adding any, so a bad part drops the header
   * whole rather than leaving half of it. */
  int rc = each_bin_part(v, vlen, scratch, ignore_part, NULL);
  if (rc == 0) {
    size_t before = md->count;
    struct append_ctx c = {md, key, klen};
    rc = each_bin_part(v, vlen, scratch, append_part, &c);
    if (rc != 0) {
      while (md->count > before) {
        md->count--;
        entry_free(md, md->count);
      }
    }
  } else {
    rc = 0; /* not base64: dropped, as gRPC allows */
  }
  if (scratch != small)
    free(scratch);
  return rc;
}
