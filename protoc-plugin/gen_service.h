/* protoc-gen-sluice: the code of one service, for <file>.sluice.h and
 * <file>.sluice.c. The names are the contract the runtime and users rely
 * on; see docs in the generated header. */
#ifndef SLUICE_PLUGIN_GEN_SERVICE_H
#define SLUICE_PLUGIN_GEN_SERVICE_H

#include "model.h"
#include "printer.h"

/* Appends the declarations of sm to a header; n_files: how many
 * FileDescriptorProtos its reflection table holds. */
void gen_service_header(printer *p, const service_model *sm, size_t n_files);

/* Appends the definitions of sm to a source file; its reflection table
 * points at the n_files arrays sluice_fd_<i>_ the file defines before it. */
void gen_service_source(printer *p, const service_model *sm, size_t n_files);

#endif
