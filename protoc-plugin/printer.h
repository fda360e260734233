/* protoc-gen-sluice: a growable text buffer with printf-style appends.
 *
 * The generator writes whole files into one of these and hands the bytes to
 * protoc. Out-of-memory is sticky: after the first failed append every later
 * append is a no-op and printer_failed() says so, so generator code can print
 * freely and check once at the end instead of after every line.
 */
#ifndef SLUICE_PLUGIN_PRINTER_H
#define SLUICE_PLUGIN_PRINTER_H

#include <stddef.h>

typedef struct printer {
  char *data; /* NUL-terminated; owned by the printer */
  size_t len;
  size_t cap;
  int failed; /* non-zero once an allocation failed */
} printer;

/* Starts an empty buffer; allocates nothing yet. */
void printer_init(printer *p);

/* Appends formatted text. Sets the failed flag when memory runs out. */
void printer_printf(printer *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Non-zero when some append was lost to out-of-memory. */
int printer_failed(const printer *p);

/* Hands the text to the caller (free() it) and resets p to empty. Returns
 * NULL when an append failed; an empty buffer yields "". */
char *printer_take(printer *p);

/* Frees what the buffer holds and resets it. */
void printer_free(printer *p);

/* A newly allocated formatted string (free() it), or NULL when out of
 * memory. For the short names the generator builds. */
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
