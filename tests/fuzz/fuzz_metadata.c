/* Metadata validation and the received-header append: the input is a
 * header block ("name: value" lines, fuzz.h).
 * Invariants: the four rules of metadata_rules.h agree with a reference
 * reading of gRPC's spec; sluice_metadata_add accepts exactly what they
 * allow and stores an exact copy; sluice__metadata_add_received keeps a
 * header whole or drops it whole, a -bin value becoming one entry per
 * comma-separated base64 part; the list survives being cleared and
 * refilled (its inline arena reused). */
#include "fuzz.h"

#include <sluice/status.h>

#include "wire/base64.h"
#include "wire/metadata_internal.h"
#include "wire/metadata_rules.h"

static int key_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_' ||
         c == '.' || c == '-';
}

static int ref_key_valid(const char *k, size_t n) {
  if (n == 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!key_char(k[i]))
      return 0;
  return 1;
}

static int is(const char *k, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(k, lit, n) == 0;
}

static int ref_reserved(const char *k, size_t n) {
  if (n > 0 && k[0] == ':')
    return 1;
  if (is(k, n, "content-type") || is(k, n, "te"))
    return 1;
  if (n >= 5 && memcmp(k, "grpc-", 5) == 0)
    return !is(k, n, "grpc-previous-rpc-attempts") &&
           !is(k, n, "grpc-retry-pushback-ms") &&
           !is(k, n, "grpc-status-details-bin");
  return 0;
}

static int ref_ascii(const uint8_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (v[i] < 0x20 || v[i] > 0x7E)
      return 0;
  return 1;
}

static int ref_bin(const char *k, size_t n) {
  return n >= 4 && memcmp(k + n - 4, "-bin", 4) == 0;
}

static void check_entry(const sluice_metadata *md, size_t i, const char *k,
                        size_t kn, const void *v, size_t vn) {
  const char *key;
  const void *value;
  size_t len;
  FUZZ_CHECK(sluice_metadata_get(md, i, &key, &value, &len) == 0);
  FUZZ_CHECK(strlen(key) == kn && memcmp(key, k, kn) == 0);
  FUZZ_CHECK(len == vn && (vn == 0 || memcmp(value, v, vn) == 0));
  FUZZ_CHECK(((const char *)value)[len] == '\0');
}

/* The parts a -bin value splits into, trimmed, or -1 if one is not
 * base64; decoded, they must be the entries added. */
static void check_bin(const sluice_metadata *md, size_t first, const char *k,
                      size_t kn, const uint8_t *v, size_t vn) {
  size_t start = 0, i = first;
  uint8_t *dec = fuzz_dup(NULL, SLUICE__BASE64_DECODED_MAX(vn));
  for (;;) {
    size_t end = start;
    while (end < vn && v[end] != ',')
      end++;
    size_t a = start, b = end;
    while (a < b && (v[a] == ' ' || v[a] == '\t'))
      a++;
    while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
      b--;
    size_t n;
    FUZZ_CHECK(sluice__base64_decode((const char *)v + a, b - a, dec, &n) == 0);
    check_entry(md, i++, k, kn, dec, n);
    if (end == vn)
      break;
    start = end + 1;
  }
  FUZZ_CHECK(i == sluice_metadata_count(md));
  free(dec);
}

static int bin_valid(const uint8_t *v, size_t vn, size_t *parts) {
  size_t start = 0;
  uint8_t *dec = fuzz_dup(NULL, SLUICE__BASE64_DECODED_MAX(vn));
  int ok = 1;
  *parts = 0;
  for (;;) {
    size_t end = start;
    while (end < vn && v[end] != ',')
      end++;
    size_t a = start, b = end, n;
    while (a < b && (v[a] == ' ' || v[a] == '\t'))
      a++;
    while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
      b--;
    if (sluice__base64_decode((const char *)v + a, b - a, dec, &n) != 0)
      ok = 0;
    (*parts)++;
    if (end == vn)
      break;
    start = end + 1;
  }
  free(dec);
  return ok;
}

static void fill(sluice_metadata *md, sluice_metadata *api, const uint8_t *data,
                 size_t size) {
  fuzz_in in = {data, size};
  fuzz_header h;
  while (fuzz_next_header(&in, &h)) {
    /* Exact-size copies, so that an over-read shows. */
    char *k = (char *)fuzz_dup(h.name, h.nlen);
    uint8_t *v = fuzz_dup(h.value, h.vlen);
    size_t kn = h.nlen, vn = h.vlen;

    FUZZ_CHECK(sluice__md_key_valid(k, kn) == ref_key_valid(k, kn));
    FUZZ_CHECK(sluice__md_is_bin(k, kn) == ref_bin(k, kn));
    FUZZ_CHECK(sluice__md_ascii_value_valid(v, vn) == ref_ascii(v, vn));
    FUZZ_CHECK(sluice__md_is_reserved(k, kn) == ref_reserved(k, kn));

    /* As received from a peer. */
    size_t before = sluice_metadata_count(md);
    FUZZ_CHECK(sluice__metadata_add_received(md, k, kn, v, vn) == 0);
    size_t added = sluice_metadata_count(md) - before;
    int key_ok = kn > 0 && k[0] == ':' ? ref_key_valid(k + 1, kn - 1)
                                       : ref_key_valid(k, kn);
    if (!key_ok) {
      FUZZ_CHECK(added == 0);
    } else if (!ref_bin(k, kn)) {
      FUZZ_CHECK(added == (size_t)ref_ascii(v, vn));
      if (added)
        check_entry(md, before, k, kn, v, vn);
    } else {
      size_t parts;
      if (bin_valid(v, vn, &parts)) {
        FUZZ_CHECK(added == parts);
        check_bin(md, before, k, kn, v, vn);
      } else {
        FUZZ_CHECK(added == 0);
      }
    }

    /* As an application adds it: the key is a C string. */
    char *ks = malloc(kn + 1);
    FUZZ_CHECK(ks != NULL);
    memcpy(ks, k, kn);
    ks[kn] = '\0';
    size_t ksn = strlen(ks);
    before = sluice_metadata_count(api);
    int rc = sluice_metadata_add(api, ks, v, vn);
    int allowed = ref_key_valid(ks, ksn) &&
                  !(ksn >= 5 && memcmp(ks, "grpc-", 5) == 0) &&
                  (ref_bin(ks, ksn) || ref_ascii(v, vn));
    FUZZ_CHECK(rc == (allowed ? 0 : SLUICE_ERR_BAD_METADATA));
    FUZZ_CHECK(sluice_metadata_count(api) == before + (allowed ? 1 : 0));
    if (allowed) {
      check_entry(api, before, ks, ksn, v, vn);
      size_t fl = 0;
      const char *found = sluice_metadata_find(api, ks, &fl);
      FUZZ_CHECK(found != NULL && ref_key_valid(ks, ksn));
    }
    free(ks);
    free(k);
    free(v);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sluice_metadata *md, *api;
  FUZZ_CHECK(sluice_metadata_new(&md) == 0);
  FUZZ_CHECK(sluice_metadata_new(&api) == 0);
  fill(md, api, data, size);
  /* A server connection reuses one list for every request. */
  sluice__metadata_clear(md);
  FUZZ_CHECK(sluice_metadata_count(md) == 0);
  sluice_metadata_del(api);
  FUZZ_CHECK(sluice_metadata_new(&api) == 0);
  fill(md, api, data, size);
  sluice_metadata_del(md);
  sluice_metadata_del(api);
  return 0;
}
