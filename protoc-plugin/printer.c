/* protoc-gen-sluice: growable text buffer. */
#include "printer.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void printer_init(printer *p) { memset(p, 0, sizeof *p); }

/* Makes room for extra more bytes plus the NUL; doubles so that a file of n
 * bytes costs O(n) copying overall. */
static int reserve(printer *p, size_t extra) {
  if (p->len + extra + 1 <= p->cap)
    return 0;
  size_t cap = p->cap ? p->cap : 256;
  while (cap < p->len + extra + 1) {
    if (cap > SIZE_MAX / 2)
      return -1;
    cap *= 2;
  }
  char *d = realloc(p->data, cap);
  if (d == NULL)
    return -1;
  p->data = d;
  p->cap = cap;
  return 0;
}

void printer_printf(printer *p, const char *fmt, ...) {
  if (p->failed)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || reserve(p, (size_t)n) != 0) {
    p->failed = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(p->data + p->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  p->len += (size_t)n;
}

int printer_failed(const printer *p) { return p->failed; }

char *printer_take(printer *p) {
  char *out = NULL;
  if (!p->failed) {
    out = p->data ? p->data : calloc(1, 1);
    p->data = NULL;
  }
  printer_free(p);
  return out;
}

void printer_free(printer *p) {
  free(p->data);
  printer_init(p);
}

char *str_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return NULL;
  char *s = malloc((size_t)n + 1);
  if (s == NULL)
    return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}
