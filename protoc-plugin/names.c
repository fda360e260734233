/* protoc-gen-sluice: protoc-c compatible naming (see names.h). */
#include "names.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ASCII only: proto identifiers are ASCII, and the C library's locale must
 * not change what a name becomes. */
static int is_upper(char c) { return c >= 'A' && c <= 'Z'; }
static char to_lower(char c) { return is_upper(c) ? (char)(c - 'A' + 'a') : c; }
static char to_upper(char c) {
  return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

/* Appends one piece of name [s, s+n) converted by style to out (room for it
 * is reserved by the callers: no style grows a piece beyond 2n). */
enum style { LOWER, UPPER, CAMEL };

static size_t convert(char *out, const char *s, size_t n, enum style style) {
  size_t o = 0;
  if (style == CAMEL) {
    int next_upper = 1;
    for (size_t i = 0; i < n; i++) {
      if (s[i] == '_') {
        next_upper = 1;
      } else if (next_upper) {
        out[o++] = to_upper(s[i]);
        next_upper = 0;
      } else {
        out[o++] = s[i];
      }
    }
    return o;
  }
  int was_upper = 1; /* no '_' in front of a leading capital */
  for (size_t i = 0; i < n; i++) {
    int up = is_upper(s[i]);
    if (up && !was_upper)
      out[o++] = '_';
    out[o++] = style == LOWER ? to_lower(s[i]) : to_upper(s[i]);
    was_upper = up;
  }
  return o;
}

/* Converts every dot-separated piece and joins the non-empty ones with
 * "__", as protoc-c's FullNameTo* do. */
static char *convert_full(const char *full, enum style style) {
  size_t n = strlen(full);
  char *out = malloc(3 * n + 1); /* each char: at most 2, "." -> "__" */
  if (out == NULL)
    return NULL;
  size_t o = 0;
  const char *p = full;
  while (*p) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    if (len > 0) {
      if (o > 0) {
        out[o++] = '_';
        out[o++] = '_';
      }
      o += convert(out + o, p, len, style);
    }
    p += len;
    if (*p == '.')
      p++;
  }
  out[o] = '\0';
  return out;
}

static char *convert_one(const char *name, enum style style) {
  char *out = malloc(2 * strlen(name) + 1);
  if (out == NULL)
    return NULL;
  out[convert(out, name, strlen(name), style)] = '\0';
  return out;
}

char *names_camel_to_lower(const char *name) {
  return convert_one(name, LOWER);
}

char *names_camel_to_upper(const char *name) {
  return convert_one(name, UPPER);
}

char *names_full_to_c(const char *full_name) {
  return convert_full(full_name, CAMEL);
}

char *names_full_to_lower(const char *full_name) {
  return convert_full(full_name, LOWER);
}

char *names_full_to_upper(const char *full_name) {
  return convert_full(full_name, UPPER);
}

static int has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

char *names_strip_proto(const char *file_name) {
  size_t n = strlen(file_name);
  if (has_suffix(file_name, ".protodevel"))
    n -= strlen(".protodevel");
  else if (has_suffix(file_name, ".proto"))
    n -= strlen(".proto");
  char *out = malloc(n + 1);
  if (out == NULL)
    return NULL;
  memcpy(out, file_name, n);
  out[n] = '\0';
  return out;
}

char *names_file_identifier(const char *file_name) {
  size_t n = strlen(file_name);
  char *out = malloc(3 * n + 1);
  if (out == NULL)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)file_name[i];
    if (isalnum(c) && c < 0x80) {
      out[o++] = (char)c;
    } else {
      o += (size_t)sprintf(out + o, "_%x", c);
    }
  }
  out[o] = '\0';
  return out;
}

/* C keywords up to C23. */
static const char *const c_keywords[] = {"_Alignas",
                                         "_Alignof",
                                         "_Atomic",
                                         "_BitInt",
                                         "_Bool",
                                         "_Complex",
                                         "_Decimal128",
                                         "_Decimal32",
                                         "_Decimal64",
                                         "_Generic",
                                         "_Imaginary",
                                         "_Noreturn",
                                         "_Static_assert",
                                         "_Thread_local",
                                         "alignas",
                                         "alignof",
                                         "auto",
                                         "bool",
                                         "break",
                                         "case",
                                         "char",
                                         "const",
                                         "constexpr",
                                         "continue",
                                         "default",
                                         "do",
                                         "double",
                                         "else",
                                         "enum",
                                         "extern",
                                         "false",
                                         "float",
                                         "for",
                                         "goto",
                                         "if",
                                         "inline",
                                         "int",
                                         "long",
                                         "nullptr",
                                         "register",
                                         "restrict",
                                         "return",
                                         "short",
                                         "signed",
                                         "sizeof",
                                         "static",
                                         "static_assert",
                                         "struct",
                                         "switch",
                                         "thread_local",
                                         "true",
                                         "typedef",
                                         "typeof",
                                         "typeof_unqual",
                                         "union",
                                         "unsigned",
                                         "void",
                                         "volatile",
                                         "while"};

/* The C++ ones on top (protoc-c escapes field names against these too), so
 * a generated header also survives a C++ compiler. */
static const char *const cxx_keywords[] = {"and",
                                           "and_eq",
                                           "asm",
                                           "bitand",
                                           "bitor",
                                           "catch",
                                           "char16_t",
                                           "char32_t",
                                           "char8_t",
                                           "class",
                                           "compl",
                                           "concept",
                                           "const_cast",
                                           "consteval",
                                           "constinit",
                                           "co_await",
                                           "co_return",
                                           "co_yield",
                                           "decltype",
                                           "delete",
                                           "dynamic_cast",
                                           "explicit",
                                           "export",
                                           "friend",
                                           "mutable",
                                           "namespace",
                                           "new",
                                           "noexcept",
                                           "not",
                                           "not_eq",
                                           "operator",
                                           "or",
                                           "or_eq",
                                           "private",
                                           "protected",
                                           "public",
                                           "reinterpret_cast",
                                           "requires",
                                           "static_cast",
                                           "template",
                                           "this",
                                           "throw",
                                           "try",
                                           "typeid",
                                           "typename",
                                           "using",
                                           "virtual",
                                           "wchar_t",
                                           "xor",
                                           "xor_eq"};

static int in_list(const char *name, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(name, list[i]) == 0)
      return 1;
  return 0;
}

int names_is_c_keyword(const char *name) {
  return in_list(name, c_keywords, sizeof c_keywords / sizeof c_keywords[0]);
}

int names_is_keyword(const char *name) {
  return names_is_c_keyword(name) ||
         in_list(name, cxx_keywords,
                 sizeof cxx_keywords / sizeof cxx_keywords[0]);
}
