/* protoc-gen-sluice: per-file generation and collision checks. */
#include "gen_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_service.h"
#include "model.h"
#include "names.h"
#include "printer.h"
#include "symbols.h"

static const Google__Protobuf__FileDescriptorProto *
find_file(const Google__Protobuf__Compiler__CodeGeneratorRequest *req,
          const char *name) {
  for (size_t i = 0; i < req->n_proto_file; i++)
    if (req->proto_file[i]->name && strcmp(req->proto_file[i]->name, name) == 0)
      return req->proto_file[i];
  return NULL;
}

/* Adds protoc-c's identifiers of f and of everything it imports, directly
 * or not: all of their headers end up in the translation unit of ours. */
static void add_protoc_c_closure(
    symtab *t, const Google__Protobuf__Compiler__CodeGeneratorRequest *req,
    const Google__Protobuf__FileDescriptorProto *f, const char ***seen,
    size_t *n_seen) {
  for (size_t i = 0; i < *n_seen; i++)
    if (strcmp((*seen)[i], f->name) == 0)
      return;
  const char **s = realloc(*seen, (*n_seen + 1) * sizeof *s);
  if (s == NULL) {
    t->failed = 1;
    return;
  }
  s[(*n_seen)++] = f->name;
  *seen = s;
  symbols_add_protoc_c(t, f);
  for (size_t i = 0; i < f->n_dependency; i++) {
    const Google__Protobuf__FileDescriptorProto *d =
        find_file(req, f->dependency[i]);
    if (d)
      add_protoc_c_closure(t, req, d, seen, n_seen);
  }
}

/* Fails when one of our identifiers is also one of protoc-c's, or two of
 * ours coincide: the C compiler would reject the pair much later with a
 * message that does not name the .proto. */
static int
check_collisions(const Google__Protobuf__Compiler__CodeGeneratorRequest *req,
                 const Google__Protobuf__FileDescriptorProto *f,
                 const service_model *sms, size_t n_sms, char **err) {
  symtab theirs, ours;
  symtab_init(&theirs);
  symtab_init(&ours);
  const char **seen = NULL;
  size_t n_seen = 0;
  add_protoc_c_closure(&theirs, req, f, &seen, &n_seen);
  free(seen);
  for (size_t i = 0; i < n_sms; i++)
    symbols_add_sluice(&ours, &sms[i]);

  int rc = 0;
  if (theirs.failed || ours.failed) {
    *err = str_printf("%s: out of memory", f->name);
    rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < ours.n; i++) {
    const symbol *mine = &ours.v[i];
    const symbol *other = symtab_find(&theirs, mine->name);
    if (other == NULL) {
      for (size_t j = 0; j < i; j++)
        if (strcmp(ours.v[j].name, mine->name) == 0)
          other = &ours.v[j];
    }
    if (other) {
      *err = str_printf("%s: the C name '%s' (%s) collides with %s; rename "
                        "the method or service",
                        f->name, mine->name, mine->origin, other->origin);
      rc = -1;
    }
  }
  symtab_free(&theirs);
  symtab_free(&ours);
  return rc;
}

/* protoc-c puts every method, keyword or not, into a struct member of its
 * generic service API; a C keyword there breaks protoc-c's own header (C++
 * ones only matter to C++). Ours is escaped, so all we can do is say where
 * the compile error will come from. */
static void warn_keywords(const Google__Protobuf__FileDescriptorProto *f,
                          const service_model *sm) {
  for (size_t i = 0; i < sm->n_methods; i++)
    if (names_is_c_keyword(sm->methods[i].lower))
      fprintf(stderr,
              "protoc-gen-sluice: warning: %s: method %s of %s: protoc-c "
              "names a member of %s_Service '%s', a C keyword, so its "
              "header will not compile; rename the method (sluice "
              "itself uses '%s')\n",
              f->name, sm->methods[i].name, sm->full_name, sm->c_name,
              sm->methods[i].lower, sm->methods[i].member);
}

/* The runtime hedges unary and server-streaming calls only; a hedging
 * policy on a method whose client streams is kept (a service config may
 * override it anyway) but never used. */
static void warn_hedging(const Google__Protobuf__FileDescriptorProto *f,
                         const service_model *sm) {
  for (size_t i = 0; i < sm->n_methods; i++) {
    const method_model *mm = &sm->methods[i];
    if (mm->defaults.has_config && mm->defaults.config.has_hedging &&
        sluice_call_kind_streams_requests(mm->kind))
      fprintf(stderr,
              "protoc-gen-sluice: warning: %s: method %s of %s: option "
              "(sluice.method).hedging_policy on a %s method is ignored: "
              "sluice hedges unary and server-streaming calls only\n",
              f->name, mm->name, sm->full_name,
              mm->kind == SLUICE_CALL_BIDI_STREAMING ? "bidi-streaming"
                                                     : "client-streaming");
  }
}

/* f and every file it imports, directly or not (those the request holds),
 * each once, f first: what server reflection sends for f. Returns the
 * count, or 0 without memory. */
static size_t
file_closure(const Google__Protobuf__Compiler__CodeGeneratorRequest *req,
             const Google__Protobuf__FileDescriptorProto *f,
             const Google__Protobuf__FileDescriptorProto ***out) {
  const Google__Protobuf__FileDescriptorProto **v =
      malloc((req->n_proto_file + 1) * sizeof *v);
  if (v == NULL)
    return 0;
  size_t n = 0;
  v[n++] = f;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < v[i]->n_dependency; j++) {
      const Google__Protobuf__FileDescriptorProto *d =
          find_file(req, v[i]->dependency[j]);
      int seen = d == NULL;
      for (size_t k = 0; k < n && !seen; k++)
        seen = v[k] == d;
      if (!seen && n < req->n_proto_file + 1)
        v[n++] = d;
    }
  *out = v;
  return n;
}

/* static const unsigned char sluice_fd_<i>_[]: the FileDescriptorProto of
 * files[i] as protoc gave it, without source_code_info (comments and
 * spans, which reflection clients do not need). */
static int emit_descriptors(printer *c,
                            const Google__Protobuf__FileDescriptorProto **files,
                            size_t n) {
  for (size_t i = 0; i < n; i++) {
    Google__Protobuf__FileDescriptorProto copy = *files[i];
    copy.source_code_info = NULL;
    size_t len = protobuf_c_message_get_packed_size(&copy.base);
    uint8_t *bytes = malloc(len ? len : 1);
    if (bytes == NULL)
      return -1;
    protobuf_c_message_pack(&copy.base, bytes);
    char line[160];
    const printer_var vars[] = {{"file", files[i]->name}, {NULL, NULL}};
    printer_print(c, vars, "/* $file$ */\n");
    snprintf(line, sizeof line,
             "static const unsigned char sluice_fd_%zu_[] = {", i);
    printer_print(c, vars, line);
    for (size_t j = 0; j < len; j++) {
      snprintf(line, sizeof line, "%s0x%02x,", j % 12 == 0 ? "\n    " : " ",
               bytes[j]);
      printer_print(c, vars, line);
    }
    if (len == 0) /* C has no empty arrays; an empty message is 0 bytes */
      printer_print(c, vars, "\n    0");
    printer_print(c, vars, "\n};\n\n");
    free(bytes);
  }
  return 0;
}

int gen_file(const Google__Protobuf__Compiler__CodeGeneratorRequest *req,
             const Google__Protobuf__FileDescriptorProto *f, gen_output out[2],
             char **err) {
  memset(out, 0, 2 * sizeof *out);
  *err = NULL;
  int rc = -1;
  service_model *sms = calloc(f->n_service ? f->n_service : 1, sizeof *sms);
  size_t n_sms = 0;
  char *base = names_strip_proto(f->name);
  char *guard = names_file_identifier(f->name);
  printer h, c;
  printer_init(&h);
  printer_init(&c);
  if (sms == NULL || base == NULL || guard == NULL)
    goto nomem;

  for (size_t i = 0; i < f->n_service; i++) {
    char *why = NULL;
    if (service_model_build(&sms[i], f->package, f->service[i], &why) != 0) {
      n_sms = i + 1;
      *err = str_printf("%s: %s", f->name, why ? why : "out of memory");
      free(why);
      goto done;
    }
    n_sms = i + 1;
  }
  if (check_collisions(req, f, sms, n_sms, err) != 0)
    goto done;
  for (size_t i = 0; i < n_sms; i++) {
    warn_keywords(f, &sms[i]);
    warn_hedging(f, &sms[i]);
  }

  const printer_var vars[] = {
      {"file", f->name}, {"guard", guard}, {"base", base}, {NULL, NULL}};
  printer_print(&h, vars,
                "/* Generated by protoc-gen-sluice. DO NOT EDIT! */\n"
                "/* Generated from: $file$ */\n"
                "#ifndef SLUICE_GENERATED_$guard$_INCLUDED\n"
                "#define SLUICE_GENERATED_$guard$_INCLUDED\n\n"
                "#include <sluice/sluice.h>\n\n"
                "#include \"$base$.pb-c.h\"\n\n"
                "#ifdef __cplusplus\n"
                "extern \"C\" {\n"
                "#endif\n\n");
  const Google__Protobuf__FileDescriptorProto **closure = NULL;
  size_t n_closure = 0;
  if (n_sms > 0) {
    n_closure = file_closure(req, f, &closure);
    if (n_closure == 0)
      goto nomem;
  }
  for (size_t i = 0; i < n_sms; i++)
    gen_service_header(&h, &sms[i], n_closure);
  printer_print(&h, vars,
                "#ifdef __cplusplus\n"
                "}\n"
                "#endif\n"
                "#endif\n");

  printer_print(&c, vars,
                "/* Generated by protoc-gen-sluice. DO NOT EDIT! */\n"
                "/* Generated from: $file$ */\n"
                "#include <stddef.h>\n"
                "#include <stdint.h>\n\n"
                "#include \"$base$.sluice.h\"\n\n");
  if (n_sms > 0 && emit_descriptors(&c, closure, n_closure) != 0) {
    free(closure);
    goto nomem;
  }
  for (size_t i = 0; i < n_sms; i++)
    gen_service_source(&c, &sms[i], n_closure);
  free(closure);
  const char *why = printer_error(&h) ? printer_error(&h) : printer_error(&c);
  if (why) {
    *err = str_printf("%s: %s", f->name, why);
    goto done;
  }

  out[0].name = str_printf("%s.sluice.h", base);
  out[1].name = str_printf("%s.sluice.c", base);
  out[0].content = printer_take(&h);
  out[1].content = printer_take(&c);
  if (!out[0].name || !out[1].name || !out[0].content || !out[1].content) {
    for (int i = 0; i < 2; i++) {
      free(out[i].name);
      free(out[i].content);
    }
    memset(out, 0, 2 * sizeof *out);
    goto nomem;
  }
  rc = 0;
  goto done;
nomem:
  *err = str_printf("%s: out of memory", f->name);
done:
  for (size_t i = 0; i < n_sms; i++)
    service_model_free(&sms[i]);
  free(sms);
  free(base);
  free(guard);
  printer_free(&h);
  printer_free(&c);
  return rc;
}
