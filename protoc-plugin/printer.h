/* protoc-gen-sluice: a growable text buffer with protoc-c's $var$ templates.
 *
 * The generator writes whole files into one of these and hands the bytes to
 * protoc. Text comes from templates in which $name$ stands for a value from
 * a small table of name/value pairs ("$$" is a '$'), as protoc-c's
 * io::Printer does, so a template reads like the code it prints. Two
 * helpers keep generated lines within 80 columns where that is easy: doc
 * comments are re-flowed, parameter and argument lists go one per line
 * when they do not fit on one. Nothing else is formatted.
 *
 * Failure is sticky: after the first failed append (out of memory, or a
 * $name$ the table lacks, a generator bug) every later append is a no-op
 * and printer_failed() says so, so generator code can print freely and
 * check once at the end instead of after every line.
 */
#ifndef SLUICE_PLUGIN_PRINTER_H
#define SLUICE_PLUGIN_PRINTER_H

#include <stddef.h>

/* Generated lines stay within this many columns where the printer can
 * break them. */
#define PRINTER_WIDTH 80

typedef struct printer {
  char *data; /* NUL-terminated; owned by the printer */
  size_t len;
  size_t cap;
  const char *error; /* NULL, or why an append was lost (static text) */
} printer;

/* One template variable: $name$ prints value. A table of them ends with an
 * entry whose name is NULL. */
typedef struct printer_var {
  const char *name;
  const char *value;
} printer_var;

/* Starts an empty buffer; allocates nothing yet. */
void printer_init(printer *p);

/* Appends text with each $name$ replaced by its value in vars (which may
 * be NULL when text has none). */
void printer_print(printer *p, const printer_var *vars, const char *text);

/* Appends text (substituted as by printer_print) as a C comment, its words
 * re-flowed into lines of at most PRINTER_WIDTH columns (a longer word gets
 * a line of its own): indent spaces, then "/" "* " on the first line and
 * " * " on the others, " *" "/" and a newline at the end. Line breaks in text
 * are spaces. */
void printer_comment(printer *p, const printer_var *vars, int indent,
                     const char *text);

/* Appends open, the items (a NULL-terminated list of templates) separated
 * by ", ", then close, all substituted: on one line when its first line
 * fits in PRINTER_WIDTH columns, else with a line break after open and
 * each item on a line of its own, indented 4 columns deeper than open's
 * line, with "," after all but the last. For parameter lists, argument
 * lists and initializers: open "int f(", close ");\n" or ") {\n". */
void printer_list(printer *p, const printer_var *vars, const char *open,
                  const char *const *items, const char *close);

/* Non-zero when some append was lost. */
int printer_failed(const printer *p);

/* Why: "out of memory" or an internal error, for the plugin's message;
 * NULL when nothing failed. */
const char *printer_error(const printer *p);

/* Hands the text to the caller (free() it) and resets p to empty. Returns
 * NULL when an append failed; an empty buffer yields "". */
char *printer_take(printer *p);

/* Frees what the buffer holds and resets it. */
void printer_free(printer *p);

/* A newly allocated formatted string (free() it), or NULL when out of
 * memory. For the short names the generator builds. */
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
