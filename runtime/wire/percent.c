/* grpc-message percent-encoding. */
#include "wire/percent.h"

static int passes_as_is(unsigned char c) {
  return c >= 0x20 && c <= 0x7E && c != '%';
}

static int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

int sluice__percent_needs_encoding(const char *in, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!passes_as_is((unsigned char)in[i]))
      return 1;
  return 0;
}

size_t sluice__percent_encode(const char *in, size_t n, char *out) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)in[i];
    if (passes_as_is(c)) {
      out[o++] = (char)c;
    } else {
      out[o++] = '%';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  return o;
}

size_t sluice__percent_decode(const char *in, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (in[i] == '%' && n - i >= 3) {
      int hi = hex_value((unsigned char)in[i + 1]);
      int lo = hex_value((unsigned char)in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out[o++] = (char)(hi << 4 | lo);
        i += 2;
        continue;
      }
    }
    out[o++] = in[i];
  }
  return o;
}
