/* protoc-gen-sluice: the code of one service, for <file>.sluice.h and
 * <file>.sluice.c. The names are the contract the runtime and users rely
 * on; see docs in the generated header. */
#ifndef SLUICE_PLUGIN_GEN_SERVICE_H
#define SLUICE_PLUGIN_GEN_SERVICE_H

#include "model.h"
#include "printer.h"

/* Appends the declarations of sm to a header. */
void gen_service_header(printer *p, const service_model *sm);

/* Appends the definitions of sm to a source file. */
void gen_service_source(printer *p, const service_model *sm);

#endif
