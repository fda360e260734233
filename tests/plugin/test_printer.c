/* protoc-gen-sluice's printer on its own: $var$ substitution, comments
 * re-flowed to 80 columns, lists that fit on one line or go one item per
 * line, and the sticky failure of an undefined variable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "printer.h"

static const printer_var vars[] = {{"svc", "pkg__svc"},
                                   {"m", "say_hello"},
                                   {"In", "Pkg__Request"},
                                   {"long", "a_rather_long_identifier_that_"
                                            "takes_most_of_a_line_by_itself"},
                                   {NULL, NULL}};

/* What p holds, taken (free() it). */
static char *take(printer *p) {
  char *s = printer_take(p);
  assert_non_null(s);
  return s;
}

static void test_substitution(void **state) {
  (void)state;
  printer p;
  printer_init(&p);
  printer_print(&p, vars, "int $svc$__$m$__async(const $In$ *req); /* $$1 */");
  printer_print(&p, NULL, "\n");
  char *s = take(&p);
  assert_string_equal(s,
                      "int pkg__svc__say_hello__async(const Pkg__Request *req);"
                      " /* $1 */\n");
  free(s);
}

static void test_undefined_variable_fails(void **state) {
  (void)state;
  printer p;
  printer_init(&p);
  printer_print(&p, vars, "$svc$ $nope$");
  assert_true(printer_failed(&p));
  assert_non_null(printer_error(&p));
  printer_print(&p, vars, "more"); /* a no-op now */
  assert_null(printer_take(&p));

  printer_init(&p);
  printer_print(&p, vars, "unpaired $svc");
  assert_true(printer_failed(&p));
  printer_free(&p);
}

/* Every line of s is at most 80 columns. */
static void assert_narrow(const char *s) {
  while (*s) {
    size_t n = strcspn(s, "\n");
    assert_true(n <= PRINTER_WIDTH);
    s += n + (s[n] == '\n');
  }
}

static void test_comment_reflow(void **state) {
  (void)state;
  printer p;
  printer_init(&p);
  printer_comment(&p, vars, 2,
                  "Short words and $long$ $long$ names, as a\ngenerated doc "
                  "comment has them; each line breaks before 80 columns and "
                  "the last one ends the comment.");
  char *s = take(&p);
  assert_narrow(s);
  assert_true(strncmp(s, "  /* Short words", 16) == 0);
  assert_non_null(strstr(s, "\n   * "));
  assert_string_equal(s + strlen(s) - 4, " */\n");
  assert_null(strstr(s, "  \n"));
  free(s);

  printer_init(&p);
  printer_comment(&p, NULL, 0, "One line.");
  s = take(&p);
  assert_string_equal(s, "/* One line. */\n");
  free(s);
}

static void test_list(void **state) {
  (void)state;
  printer p;
  printer_init(&p);
  printer_list(
      &p, vars, "int $svc$__$m$__send(",
      (const char *const[]){"sluice_call *call", "const $In$ *msg", NULL},
      ");\n");
  char *s = take(&p);
  assert_string_equal(
      s, "int pkg__svc__say_hello__send(sluice_call *call, const Pkg__Request "
         "*msg);\n");
  free(s);

  printer_init(&p);
  printer_list(&p, vars, "  return f(",
               (const char *const[]){"$long$", "$long$", "x", NULL}, ");\n");
  s = take(&p);
  assert_narrow(s);
  assert_string_equal(s, "  return f(\n"
                         "      a_rather_long_identifier_that_takes_most_of_a_"
                         "line_by_itself,\n"
                         "      a_rather_long_identifier_that_takes_most_of_a_"
                         "line_by_itself,\n"
                         "      x);\n");
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_substitution),
      cmocka_unit_test(test_undefined_variable_fails),
      cmocka_unit_test(test_comment_reflow),
      cmocka_unit_test(test_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
