/* Base64 without padding on output; both forms on input. */
#include "wire/base64.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Value of a base64 character, or -1 outside the alphabet. */
static int sextet(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

size_t sluice__base64_encoded_len(size_t n) {
  return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

size_t sluice__base64_encode(const uint8_t *in, size_t n, char *out) {
  size_t i = 0, o = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    out[o++] = alphabet[v >> 18];
    out[o++] = alphabet[(v >> 12) & 63];
    out[o++] = alphabet[(v >> 6) & 63];
    out[o++] = alphabet[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)in[i] << 16;
    out[o++] = alphabet[v >> 18];
    out[o++] = alphabet[(v >> 12) & 63];
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
    out[o++] = alphabet[v >> 18];
    out[o++] = alphabet[(v >> 12) & 63];
    out[o++] = alphabet[(v >> 6) & 63];
  }
  return o;
}

int sluice__base64_decode(const char *in, size_t n, uint8_t *out,
                          size_t *out_len) {
  /* Padding is only legal when it completes a 4-character group. */
  if (n % 4 == 0 && n > 0 && in[n - 1] == '=') {
    n--;
    if (in[n - 1] == '=')
      n--;
  }
  if (n % 4 == 1)
    return -1;
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int s = sextet((unsigned char)in[i]);
    if (s < 0)
      return -1;
    acc = (acc << 6) | (uint32_t)s;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (uint8_t)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  *out_len = o;
  return 0;
}
