/* protoc-gen-sluice: growable text buffer with $var$ templates. */
#include "printer.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kNoMem[] = "out of memory";
static const char kBadTemplate[] =
    "internal error: a generator template is malformed";

void printer_init(printer *p) { memset(p, 0, sizeof *p); }

static void fail(printer *p, const char *why) {
  if (p->error == NULL)
    p->error = why;
}

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

static void append(printer *p, const char *s, size_t n) {
  if (p->error)
    return;
  if (reserve(p, n) != 0) {
    fail(p, kNoMem);
    return;
  }
  memcpy(p->data + p->len, s, n);
  p->len += n;
  p->data[p->len] = '\0';
}

static void append_spaces(printer *p, size_t n) {
  while (n-- > 0)
    append(p, " ", 1);
}

static const char *lookup(const printer_var *vars, const char *name, size_t n) {
  for (; vars && vars->name; vars++)
    if (strlen(vars->name) == n && memcmp(vars->name, name, n) == 0)
      return vars->value;
  return NULL;
}

void printer_print(printer *p, const printer_var *vars, const char *text) {
  while (*text && !p->error) {
    const char *d = strchr(text, '$');
    if (d == NULL) {
      append(p, text, strlen(text));
      return;
    }
    append(p, text, (size_t)(d - text));
    const char *end = strchr(d + 1, '$');
    const char *value = end == d + 1 ? "$" : NULL;
    if (end && !value)
      value = lookup(vars, d + 1, (size_t)(end - d - 1));
    if (value == NULL) {
      /* A generator bug: say which variable, once. */
      if (end)
        fprintf(stderr,
                "protoc-gen-sluice: internal error: template variable "
                "$%.*s$ is not defined\n",
                (int)(end - d - 1), d + 1);
      fail(p, kBadTemplate);
      return;
    }
    append(p, value, strlen(value));
    text = end + 1;
  }
}

/* text substituted into a new string (free() it), or NULL with p failed. */
static char *expand(printer *p, const printer_var *vars, const char *text) {
  printer s;
  printer_init(&s);
  printer_print(&s, vars, text);
  if (s.error == NULL && s.data == NULL)
    append(&s, "", 0);
  if (s.error) {
    fail(p, s.error);
    printer_free(&s);
    return NULL;
  }
  return s.data;
}

void printer_comment(printer *p, const printer_var *vars, int indent,
                     const char *text) {
  char *s = expand(p, vars, text);
  if (s == NULL)
    return;
  const size_t margin = (size_t)(indent > 0 ? indent : 0);
  append_spaces(p, margin);
  append(p, "/*", 2);
  size_t col = margin + 2;
  int line_empty = 1;
  const char *w = s + strspn(s, " \n");
  while (*w) {
    size_t n = strcspn(w, " \n");
    const char *next = w + n + strspn(w + n, " \n");
    /* The last word keeps room for the closing " *" "/". */
    size_t need = 1 + n + (*next ? 0 : 3);
    if (!line_empty && col + need > PRINTER_WIDTH) {
      append(p, "\n", 1);
      append_spaces(p, margin);
      append(p, " *", 2);
      col = margin + 2;
    }
    append(p, " ", 1);
    append(p, w, n);
    col += 1 + n;
    line_empty = 0;
    w = next;
  }
  append(p, " */\n", 4);
  free(s);
}

/* Columns of s up to its first newline. */
static size_t first_line_len(const char *s) { return strcspn(s, "\n"); }

/* Columns of the last line of s. */
static size_t last_line_len(const char *s) {
  const char *nl = strrchr(s, '\n');
  return strlen(nl ? nl + 1 : s);
}

/* Leading spaces of the last line of s. */
static size_t last_line_indent(const char *s) {
  const char *nl = strrchr(s, '\n');
  return strspn(nl ? nl + 1 : s, " ");
}

void printer_list(printer *p, const printer_var *vars, const char *open,
                  const char *const *items, const char *close) {
  size_t n = 0;
  while (items[n])
    n++;
  char **v = calloc(n ? n : 1, sizeof *v);
  char *o = expand(p, vars, open);
  char *c = expand(p, vars, close);
  if (v == NULL)
    fail(p, kNoMem);
  for (size_t i = 0; v && i < n; i++)
    v[i] = expand(p, vars, items[i]);
  if (p->error)
    goto done;

  size_t one_line = last_line_len(o) + first_line_len(c);
  for (size_t i = 0; i < n; i++)
    one_line += strlen(v[i]) + (i ? 2 : 0);
  append(p, o, strlen(o));
  if (one_line <= PRINTER_WIDTH) {
    for (size_t i = 0; i < n; i++) {
      if (i)
        append(p, ", ", 2);
      append(p, v[i], strlen(v[i]));
    }
  } else {
    size_t indent = last_line_indent(o) + 4;
    for (size_t i = 0; i < n; i++) {
      append(p, i ? ",\n" : "\n", i ? 2 : 1);
      append_spaces(p, indent);
      append(p, v[i], strlen(v[i]));
    }
  }
  append(p, c, strlen(c));
done:
  for (size_t i = 0; v && i < n; i++)
    free(v[i]);
  free(v);
  free(o);
  free(c);
}

int printer_failed(const printer *p) { return p->error != NULL; }

const char *printer_error(const printer *p) { return p->error; }

char *printer_take(printer *p) {
  char *out = NULL;
  if (!p->error) {
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
