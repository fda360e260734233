/* Metadata key and value rules. */
#include "wire/metadata_rules.h"

#include <string.h>

static int equals(const char *s, size_t n, const char *lit) {
  size_t m = strlen(lit);
  return n == m && memcmp(s, lit, m) == 0;
}

int sluice__md_key_valid(const char *key, size_t len) {
  if (len == 0)
    return 0;
  for (size_t i = 0; i < len; i++) {
    char c = key[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

int sluice__md_is_bin(const char *key, size_t len) {
  return len >= 4 && memcmp(key + len - 4, "-bin", 4) == 0;
}

int sluice__md_ascii_value_valid(const void *v, size_t len) {
  const unsigned char *p = v;
  for (size_t i = 0; i < len; i++)
    if (p[i] < 0x20 || p[i] > 0x7E)
      return 0;
  return 1;
}

int sluice__md_is_reserved(const char *name, size_t len) {
  if (len > 0 && name[0] == ':')
    return 1;
  if (equals(name, len, "content-type") || equals(name, len, "te"))
    return 1;
  if (len >= 5 && memcmp(name, "grpc-", 5) == 0) {
    /* Reserved by gRPC but meant for the application to see. */
    return !(equals(name, len, "grpc-previous-rpc-attempts") ||
             equals(name, len, "grpc-retry-pushback-ms") ||
             equals(name, len, "grpc-status-details-bin"));
  }
  return 0;
}
