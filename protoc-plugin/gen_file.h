/* protoc-gen-sluice: one .proto file in, <name>.sluice.h and <name>.sluice.c
 * out. */
#ifndef SLUICE_PLUGIN_GEN_FILE_H
#define SLUICE_PLUGIN_GEN_FILE_H

#include "google/protobuf/compiler/plugin.pb-c.h"

/* One generated file: name relative to the output dir, and its text. Both
 * malloc()ed, owned by whoever holds the struct. */
typedef struct gen_output {
  char *name;
  char *content;
} gen_output;

/* Generates the two files for f, which req lists (its imports are looked up
 * in req->proto_file for the collision check). On success returns 0 and
 * fills out[0] (header) and out[1] (source). On failure returns -1 and sets
 * *err to a malloc()ed message that starts with the file name; out is then
 * left empty. */
int gen_file(const Google__Protobuf__Compiler__CodeGeneratorRequest *req,
             const Google__Protobuf__FileDescriptorProto *f, gen_output out[2],
             char **err);

#endif
