/* protoc-gen-sluice: protoc plugin that emits sluice stubs next to protoc-c's
 * message code.
 *
 * protoc writes a CodeGeneratorRequest to stdin and reads a
 * CodeGeneratorResponse from stdout. A file we cannot handle is reported in
 * CodeGeneratorResponse.error (protoc prints it and fails), never by
 * crashing: the exit status is for broken pipes only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_file.h"
#include "printer.h"

typedef Google__Protobuf__Compiler__CodeGeneratorRequest request;
typedef Google__Protobuf__Compiler__CodeGeneratorResponse response;
typedef Google__Protobuf__Compiler__CodeGeneratorResponse__File response_file;

/* Reads all of stdin into *out (malloc()ed). */
static int read_all(FILE *in, uint8_t **out, size_t *len) {
  size_t cap = 65536, n = 0;
  uint8_t *buf = malloc(cap);
  if (buf == NULL)
    return -1;
  for (;;) {
    if (n == cap) {
      uint8_t *b = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
      if (b == NULL) {
        free(buf);
        return -1;
      }
      buf = b;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, in);
    n += got;
    if (got == 0) {
      if (ferror(in)) {
        free(buf);
        return -1;
      }
      break;
    }
  }
  *out = buf;
  *len = n;
  return 0;
}

static const Google__Protobuf__FileDescriptorProto *
find_file(const request *req, const char *name) {
  for (size_t i = 0; i < req->n_proto_file; i++)
    if (req->proto_file[i]->name && strcmp(req->proto_file[i]->name, name) == 0)
      return req->proto_file[i];
  return NULL;
}

/* Fills resp from req. Returns the error text to report (malloc()ed), or
 * NULL on success. Generated files are appended to resp->file. */
static char *generate(const request *req, response *resp) {
  if (req->parameter && req->parameter[0])
    return str_printf("protoc-gen-sluice takes no parameters (got \"%s\")",
                      req->parameter);
  resp->file = calloc(2 * req->n_file_to_generate + 1, sizeof *resp->file);
  if (resp->file == NULL)
    return str_printf("out of memory");
  for (size_t i = 0; i < req->n_file_to_generate; i++) {
    const char *name = req->file_to_generate[i];
    const Google__Protobuf__FileDescriptorProto *f = find_file(req, name);
    if (f == NULL)
      return str_printf("%s: not among the files protoc sent", name);
    gen_output out[2];
    char *err = NULL;
    if (gen_file(req, f, out, &err) != 0)
      return err ? err : str_printf("%s: out of memory", name);
    for (int k = 0; k < 2; k++) {
      response_file *rf = malloc(sizeof *rf);
      if (rf == NULL) {
        free(out[k].name);
        free(out[k].content);
        if (k == 0) {
          free(out[1].name);
          free(out[1].content);
        }
        return str_printf("out of memory");
      }
      google__protobuf__compiler__code_generator_response__file__init(rf);
      rf->name = out[k].name;
      rf->content = out[k].content;
      resp->file[resp->n_file++] = rf;
    }
  }
  return NULL;
}

static void free_response(response *resp) {
  for (size_t i = 0; i < resp->n_file; i++) {
    free(resp->file[i]->name);
    free(resp->file[i]->content);
    free(resp->file[i]);
  }
  free(resp->file);
  free(resp->error);
}

int main(void) {
  response resp;
  google__protobuf__compiler__code_generator_response__init(&resp);
  /* Fields are irrelevant to us, so proto3 optional is no obstacle. */
  resp.has_supported_features = 1;
  resp.supported_features =
      GOOGLE__PROTOBUF__COMPILER__CODE_GENERATOR_RESPONSE__FEATURE__FEATURE_PROTO3_OPTIONAL;

  uint8_t *in = NULL;
  size_t in_len = 0;
  request *req = NULL;
  char *error = NULL;
  if (read_all(stdin, &in, &in_len) != 0) {
    error = str_printf("cannot read the CodeGeneratorRequest from stdin");
  } else {
    req = google__protobuf__compiler__code_generator_request__unpack(
        NULL, in_len, in);
    if (req == NULL)
      error = str_printf("stdin is not a CodeGeneratorRequest (is "
                         "protoc-gen-sluice run by protoc?)");
    else
      error = generate(req, &resp);
  }
  free(in);
  if (error) {
    /* protoc wants either files or an error, not a half-written set. */
    for (size_t i = 0; i < resp.n_file; i++) {
      free(resp.file[i]->name);
      free(resp.file[i]->content);
      free(resp.file[i]);
    }
    resp.n_file = 0;
    resp.error = error;
  }

  int rc = 0;
  size_t size =
      google__protobuf__compiler__code_generator_response__get_packed_size(
          &resp);
  uint8_t *outbuf = malloc(size ? size : 1);
  if (outbuf == NULL) {
    fputs("protoc-gen-sluice: out of memory\n", stderr);
    rc = 1;
  } else {
    google__protobuf__compiler__code_generator_response__pack(&resp, outbuf);
    if (fwrite(outbuf, 1, size, stdout) != size || fflush(stdout) != 0) {
      fputs("protoc-gen-sluice: cannot write the response\n", stderr);
      rc = 1;
    }
  }
  free(outbuf);
  free_response(&resp);
  if (req)
    google__protobuf__compiler__code_generator_request__free_unpacked(req,
                                                                      NULL);
  return rc;
}
