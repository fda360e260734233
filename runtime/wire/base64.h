/* Base64 (RFC 4648 section 4, standard alphabet) for "-bin" metadata values.
 * gRPC peers must accept padded and unpadded input and should emit unpadded
 * output, so the encoder never pads. */
#ifndef SLUICE_WIRE_BASE64_H
#define SLUICE_WIRE_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Length of the unpadded encoding of n bytes. */
size_t sluice__base64_encoded_len(size_t n);

/* Encodes n bytes of in into out (room for sluice__base64_encoded_len(n)
 * bytes), unpadded, without a NUL. Returns the number of characters written. */
size_t sluice__base64_encode(const uint8_t *in, size_t n, char *out);

/* Room sluice__base64_decode needs for n input characters. */
#define SLUICE__BASE64_DECODED_MAX(n) ((n) / 4 * 3 + 3)

/* Decodes n characters of padded or unpadded base64 into out (room for
 * SLUICE__BASE64_DECODED_MAX(n) bytes) and stores the byte count in *out_len.
 * Returns 0, or -1 on a character outside the alphabet, misplaced or excess
 * '=' or an impossible length; out and *out_len are then unspecified. */
int sluice__base64_decode(const char *in, size_t n, uint8_t *out,
                          size_t *out_len);

#endif
