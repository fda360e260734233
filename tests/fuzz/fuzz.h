/* Shared helpers of the fuzz targets: an invariant check that stops the run
 * (libFuzzer saves the input; the replay driver fails its ctest), and a
 * reader that hands out the fuzzer's bytes as the knobs a target needs. */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The libFuzzer entry point every target defines (replay.c calls it too). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Not assert(): must hold in release builds too, and say which invariant
 * failed, since that is all a crash report shows at first. */
#define FUZZ_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__,     \
              #cond);                                                          \
      abort();                                                                 \
    }                                                                          \
  } while (0)

/* The input still to read. Reads past the end give zeros, so a short input
 * is still a valid (if dull) one. */
typedef struct fuzz_in {
  const uint8_t *p;
  size_t n;
} fuzz_in;

static inline uint8_t fuzz_u8(fuzz_in *in) {
  if (in->n == 0)
    return 0;
  in->n--;
  return *in->p++;
}

static inline uint32_t fuzz_u32(fuzz_in *in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v = v << 8 | fuzz_u8(in);
  return v;
}

static inline uint64_t fuzz_u64(fuzz_in *in) {
  uint64_t hi = fuzz_u32(in);
  return hi << 32 | fuzz_u32(in);
}

/* A malloc'd copy of p[0..n) with nothing after it, so that ASan sees any
 * read one byte past what the code was given (the fuzzer's own buffer may
 * be part of a larger allocation). p NULL: n bytes of room, uninitialized,
 * so that ASan and MSan see a read of what the code never wrote. */
static inline uint8_t *fuzz_dup(const void *p, size_t n) {
  uint8_t *c = malloc(n ? n : 1);
  if (!c)
    abort();
  if (p && n)
    memcpy(c, p, n);
  return c;
}

/* One header of a text header block: lines split at '\n', the name up to
 * the first ':' after its first byte (so ":path: /a/b" is ":path" and
 * "/a/b"), a single space after the ':' dropped. nghttp2 refuses CR, LF
 * and NUL in values anyway, so lines lose nothing a peer can send; a line
 * without ':' is a name with an empty value; an empty line ends a block.
 * Returns 0 at the end of the input, else 1 and the header (block_end set
 * for an empty line, name and value then empty). */
typedef struct fuzz_header {
  const char *name;
  size_t nlen;
  const uint8_t *value;
  size_t vlen;
  int block_end;
} fuzz_header;

static inline int fuzz_next_header(fuzz_in *in, fuzz_header *h) {
  if (in->n == 0)
    return 0;
  const uint8_t *line = in->p;
  const uint8_t *nl = memchr(line, '\n', in->n);
  size_t len = nl ? (size_t)(nl - line) : in->n;
  in->p += nl ? len + 1 : len;
  in->n -= nl ? len + 1 : len;
  memset(h, 0, sizeof *h);
  if (len == 0) {
    h->block_end = 1;
    h->name = "";
    h->value = (const uint8_t *)"";
    return 1;
  }
  const uint8_t *colon = len > 1 ? memchr(line + 1, ':', len - 1) : NULL;
  h->name = (const char *)line;
  h->nlen = colon ? (size_t)(colon - line) : len;
  h->value = colon ? colon + 1 : line + len;
  h->vlen = colon ? len - h->nlen - 1 : 0;
  if (h->vlen > 0 && h->value[0] == ' ') {
    h->value++;
    h->vlen--;
  }
  return 1;
}

#endif
