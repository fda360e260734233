/* Unit tests of protoc-gen-sluice's naming helpers. The expected strings are
 * what protoc-c 1.4 itself produced for the same inputs (checked with
 * protoc --c_out), since the generated stubs must name protoc-c's types and
 * descriptors exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "names.h"

typedef char *(*convert_fn)(const char *);

static void expect(convert_fn f, const char *in, const char *want) {
  char *got = f(in);
  assert_non_null(got);
  assert_string_equal(got, want);
  free(got);
}

static void test_camel_to_lower(void **state) {
  (void)state;
  expect(names_camel_to_lower, "SayHello", "say_hello");
  expect(names_camel_to_lower, "HTTPGet", "httpget");
  expect(names_camel_to_lower, "GetHTTPStatus", "get_httpstatus");
  expect(names_camel_to_lower, "Get2Things", "get2_things");
  expect(names_camel_to_lower, "already_lower", "already_lower");
  expect(names_camel_to_lower, "Default", "default");
  expect(names_camel_to_lower, "", "");
}

static void test_full_names(void **state) {
  (void)state;
  expect(names_full_to_c, ".a.b_c.d.Req.Inner", "A__BC__D__Req__Inner");
  expect(names_full_to_c, "helloworld.HelloRequest",
         "Helloworld__HelloRequest");
  expect(names_full_to_c, "Greeter", "Greeter");
  expect(names_full_to_lower, ".a.b_c.d.Req.Inner", "a__b_c__d__req__inner");
  expect(names_full_to_lower, "helloworld.Greeter", "helloworld__greeter");
  expect(names_full_to_upper, "helloworld.HelloRequest",
         "HELLOWORLD__HELLO_REQUEST");
}

static void test_files(void **state) {
  (void)state;
  expect(names_strip_proto, "a/b.proto", "a/b");
  expect(names_strip_proto, "x.protodevel", "x");
  expect(names_strip_proto, "noext", "noext");
  expect(names_file_identifier, "a/b-c.proto", "a_2fb_2dc_2eproto");
}

static void test_keywords(void **state) {
  (void)state;
  assert_true(names_is_keyword("default"));
  assert_true(names_is_c_keyword("switch"));
  assert_true(names_is_keyword("class"));
  assert_false(names_is_c_keyword("class"));
  assert_false(names_is_keyword("say_hello"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_camel_to_lower),
      cmocka_unit_test(test_full_names),
      cmocka_unit_test(test_files),
      cmocka_unit_test(test_keywords),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
