/* protoc-gen-sluice's input: the bytes are a CodeGeneratorRequest, decoded
 * and generated from as main.c does (every file_to_generate that the
 * request carries).
 * Invariants: no crash or leak on any request; gen_file either fills both
 * outputs (names ending in .sluice.h / .sluice.c, NUL-terminated text) or
 * fails with an error text that starts with the file's name and leaves
 * the outputs empty. Whether generated code compiles is checked by
 * tests/plugin for real protos, not per execution here. */
#include "fuzz.h"

#include "gen_file.h"

typedef Google__Protobuf__Compiler__CodeGeneratorRequest request;

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = fuzz_dup(data, size);
  request *req = google__protobuf__compiler__code_generator_request__unpack(
      NULL, size, copy);
  free(copy);
  if (!req)
    return 0;
  for (size_t i = 0; i < req->n_file_to_generate; i++) {
    const char *name = req->file_to_generate[i];
    const Google__Protobuf__FileDescriptorProto *f = NULL;
    for (size_t k = 0; k < req->n_proto_file && !f; k++)
      if (req->proto_file[k]->name &&
          strcmp(req->proto_file[k]->name, name) == 0)
        f = req->proto_file[k];
    if (!f)
      continue; /* main.c reports it before generating anything */
    gen_output out[2];
    memset(out, 0, sizeof out);
    char *err = NULL;
    if (gen_file(req, f, out, &err) == 0) {
      FUZZ_CHECK(err == NULL);
      for (int k = 0; k < 2; k++)
        FUZZ_CHECK(out[k].name != NULL && out[k].content != NULL);
      FUZZ_CHECK(ends_with(out[0].name, ".sluice.h"));
      FUZZ_CHECK(ends_with(out[1].name, ".sluice.c"));
      for (int k = 0; k < 2; k++) {
        free(out[k].name);
        free(out[k].content);
      }
    } else {
      /* err NULL is main.c's "out of memory" */
      if (err)
        FUZZ_CHECK(strncmp(err, name, strlen(name)) == 0);
      FUZZ_CHECK(out[0].name == NULL && out[1].name == NULL);
      free(err);
    }
  }
  google__protobuf__compiler__code_generator_request__free_unpacked(req, NULL);
  return 0;
}
