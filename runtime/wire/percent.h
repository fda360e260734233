/* Percent-encoding of grpc-message (PROTOCOL-HTTP2.md): bytes 0x20..0x7E
 * except '%' travel as-is, every other byte as %XX with uppercase hex.
 * Decoding is lenient: it never fails and never drops text. */
#ifndef SLUICE_WIRE_PERCENT_H
#define SLUICE_WIRE_PERCENT_H

#include <stddef.h>

/* Non-zero when some byte of in[0..n) must be escaped. */
int sluice__percent_needs_encoding(const char *in, size_t n);

/* Encodes in[0..n) into out (room for 3 * n bytes), without a NUL. Returns the
 * number of bytes written. */
size_t sluice__percent_encode(const char *in, size_t n, char *out);

/* Decodes every valid %XX (either case of hex) of in[0..n) into out (room
 * for n bytes, may equal in); a '%' not followed by two hex digits is copied
 * unchanged. Writes no NUL. Returns the number of bytes written. */
size_t sluice__percent_decode(const char *in, size_t n, char *out);

#endif
