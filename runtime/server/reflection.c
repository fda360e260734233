/* Server reflection, served by the library (see reflection.h).
 *
 * The request and response messages are declared to protobuf-c as
 * messages without fields: every field then arrives as an unknown field
 * (tag, wire type and the bytes after the tag, length prefix included),
 * and the unknown fields of a message we build are written out verbatim.
 * So the runtime reads ServerReflectionRequest and writes
 * ServerReflectionResponse as raw protobuf, with no generated code (whose
 * global names could clash with an application's own reflection.pb-c.c).
 * v1 and v1alpha have the same messages, field for field. */
#include "server/reflection.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "wire/pb.h"

/* The library's own files (runtime/CMakeLists.txt embeds them, each a
 * FileDescriptorSet of one file). */
extern const unsigned char sluice__fd_health[];
extern const size_t sluice__fd_health_size;
extern const unsigned char sluice__fd_reflection_v1[];
extern const size_t sluice__fd_reflection_v1_size;
extern const unsigned char sluice__fd_reflection_v1alpha[];
extern const size_t sluice__fd_reflection_v1alpha_size;

/* A LEN field as a NUL-terminated copy, or NULL without memory. */
static char *dup_n(const uint8_t *data, size_t len) {
  char *s = sluice__malloc(len + 1);
  if (s) {
    if (len)
      memcpy(s, data, len);
    s[len] = '\0';
  }
  return s;
}

/* prefix + "." + name (or name when prefix is ""). */
static char *join(const char *prefix, const uint8_t *name, size_t len) {
  size_t n = strlen(prefix);
  char *s = sluice__malloc(n + 1 + len + 1);
  if (!s)
    return NULL;
  size_t at = 0;
  if (n) {
    memcpy(s, prefix, n);
    s[n] = '.';
    at = n + 1;
  }
  if (len)
    memcpy(s + at, name, len);
  s[at + len] = '\0';
  return s;
}

/* ---- the index */

typedef struct file {
  char *name;
  const uint8_t *data; /* the FileDescriptorProto, borrowed */
  size_t len;
  char **deps;
  size_t n_deps;
} file;

typedef struct symbol {
  char *name; /* fully qualified, no leading dot */
  size_t file;
} symbol;

typedef struct extension {
  char *extendee; /* fully qualified, no leading dot */
  int32_t number;
  size_t file;
} extension;

struct sluice__reflection {
  file *files;
  size_t n_files, cap_files;
  symbol *syms;
  size_t n_syms, cap_syms;
  extension *exts;
  size_t n_exts, cap_exts;
  const sluice__routes *routes; /* list_services reads it (after start) */
};

static int grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap)
    return 0;
  size_t c = *cap ? *cap * 2 : 16;
  void *p = sluice__realloc(*v, c * size);
  if (!p)
    return -1;
  *v = p;
  *cap = c;
  return 0;
}

static int add_sym(sluice__reflection *r, char *name, size_t f) {
  if (!name ||
      grow((void **)&r->syms, &r->cap_syms, r->n_syms, sizeof *r->syms) != 0) {
    free(name);
    return SLUICE_ERR_NOMEM;
  }
  r->syms[r->n_syms].name = name;
  r->syms[r->n_syms].file = f;
  r->n_syms++;
  return 0;
}

/* The first string field num of a message, or (NULL, 0). */
static int find_string(const uint8_t *data, size_t len, uint32_t want,
                       const uint8_t **out, size_t *out_len) {
  sluice__pb r = {data, data + len};
  uint32_t num;
  int wt, rv;
  const uint8_t *d;
  size_t n;
  uint64_t v;
  *out = NULL;
  *out_len = 0;
  while ((rv = sluice__pb_field(&r, &num, &wt, &d, &n, &v)) == 1)
    if (num == want && wt == SLUICE__PB_LEN && !*out) {
      *out = d;
      *out_len = n;
    }
  return rv;
}

/* A FieldDescriptorProto of an extension, in scope prefix. */
static int index_extension(sluice__reflection *r, const char *prefix,
                           const uint8_t *data, size_t len, size_t f) {
  sluice__pb rr = {data, data + len};
  uint32_t num;
  int wt, rv;
  const uint8_t *d, *name = NULL, *ext = NULL;
  size_t n, name_len = 0, ext_len = 0;
  uint64_t v, number = 0;
  while ((rv = sluice__pb_field(&rr, &num, &wt, &d, &n, &v)) == 1) {
    if (num == 1 && wt == SLUICE__PB_LEN) {
      name = d;
      name_len = n;
    } else if (num == 2 && wt == SLUICE__PB_LEN) {
      ext = d;
      ext_len = n;
    } else if (num == 3 && wt == SLUICE__PB_VARINT) {
      number = v;
    }
  }
  if (rv < 0 || !name)
    return SLUICE_ERR_INVALID_ARG;
  int e = add_sym(r, join(prefix, name, name_len), f);
  if (e != 0 || !ext)
    return e;
  if (ext_len && ext[0] == '.') {
    ext++;
    ext_len--;
  }
  if (grow((void **)&r->exts, &r->cap_exts, r->n_exts, sizeof *r->exts) != 0)
    return SLUICE_ERR_NOMEM;
  char *extendee = dup_n(ext, ext_len);
  if (!extendee)
    return SLUICE_ERR_NOMEM;
  r->exts[r->n_exts].extendee = extendee;
  r->exts[r->n_exts].number = (int32_t)number;
  r->exts[r->n_exts].file = f;
  r->n_exts++;
  return 0;
}

/* An EnumDescriptorProto: the enum, and its values (scoped, as in
 * protobuf, beside the enum rather than inside it). */
static int index_enum(sluice__reflection *r, const char *prefix,
                      const uint8_t *data, size_t len, size_t f) {
  const uint8_t *name;
  size_t name_len;
  if (find_string(data, len, 1, &name, &name_len) < 0 || !name)
    return SLUICE_ERR_INVALID_ARG;
  int e = add_sym(r, join(prefix, name, name_len), f);
  sluice__pb rr = {data, data + len};
  uint32_t num;
  int wt, rv;
  const uint8_t *d;
  size_t n;
  uint64_t v;
  while (e == 0 && (rv = sluice__pb_field(&rr, &num, &wt, &d, &n, &v)) == 1) {
    if (num != 2 || wt != SLUICE__PB_LEN)
      continue;
    const uint8_t *vn;
    size_t vn_len;
    if (find_string(d, n, 1, &vn, &vn_len) < 0 || !vn)
      return SLUICE_ERR_INVALID_ARG;
    e = add_sym(r, join(prefix, vn, vn_len), f);
  }
  return e;
}

/* A DescriptorProto: the message, its nested messages, enums and
 * extensions. */
static int index_message(sluice__reflection *r, const char *prefix,
                         const uint8_t *data, size_t len, size_t f, int depth) {
  const uint8_t *name;
  size_t name_len;
  if (depth > 64 || find_string(data, len, 1, &name, &name_len) < 0 || !name)
    return SLUICE_ERR_INVALID_ARG;
  char *full = join(prefix, name, name_len);
  if (!full)
    return SLUICE_ERR_NOMEM;
  char *scope = sluice__strdup(full);
  int e = add_sym(r, full, f);
  if (e == 0 && !scope)
    e = SLUICE_ERR_NOMEM;
  sluice__pb rr = {data, data + len};
  uint32_t num;
  int wt, rv = 0;
  const uint8_t *d;
  size_t n;
  uint64_t v;
  while (e == 0 && (rv = sluice__pb_field(&rr, &num, &wt, &d, &n, &v)) == 1) {
    if (wt != SLUICE__PB_LEN)
      continue;
    if (num == 3)
      e = index_message(r, scope, d, n, f, depth + 1);
    else if (num == 4)
      e = index_enum(r, scope, d, n, f);
    else if (num == 6)
      e = index_extension(r, scope, d, n, f);
  }
  free(scope);
  if (e == 0 && rv < 0)
    e = SLUICE_ERR_INVALID_ARG;
  return e;
}

/* A ServiceDescriptorProto: the service and its methods. */
static int index_service(sluice__reflection *r, const char *prefix,
                         const uint8_t *data, size_t len, size_t f) {
  const uint8_t *name;
  size_t name_len;
  if (find_string(data, len, 1, &name, &name_len) < 0 || !name)
    return SLUICE_ERR_INVALID_ARG;
  char *full = join(prefix, name, name_len);
  if (!full)
    return SLUICE_ERR_NOMEM;
  char *scope = sluice__strdup(full);
  int e = add_sym(r, full, f);
  if (e == 0 && !scope)
    e = SLUICE_ERR_NOMEM;
  sluice__pb rr = {data, data + len};
  uint32_t num;
  int wt, rv;
  const uint8_t *d;
  size_t n;
  uint64_t v;
  while (e == 0 && (rv = sluice__pb_field(&rr, &num, &wt, &d, &n, &v)) == 1) {
    if (num != 2 || wt != SLUICE__PB_LEN)
      continue;
    const uint8_t *mn;
    size_t mn_len;
    if (find_string(d, n, 1, &mn, &mn_len) < 0 || !mn)
      e = SLUICE_ERR_INVALID_ARG;
    else
      e = add_sym(r, join(scope, mn, mn_len), f);
  }
  free(scope);
  return e;
}

static size_t find_file(const sluice__reflection *r, const char *name) {
  for (size_t i = 0; i < r->n_files; i++)
    if (strcmp(r->files[i].name, name) == 0)
      return i;
  return SIZE_MAX;
}

static void drop_from(sluice__reflection *r, size_t files, size_t syms,
                      size_t exts) {
  for (size_t i = files; i < r->n_files; i++) {
    free(r->files[i].name);
    for (size_t j = 0; j < r->files[i].n_deps; j++)
      free(r->files[i].deps[j]);
    free(r->files[i].deps);
  }
  for (size_t i = syms; i < r->n_syms; i++)
    free(r->syms[i].name);
  for (size_t i = exts; i < r->n_exts; i++)
    free(r->exts[i].extendee);
  r->n_files = files;
  r->n_syms = syms;
  r->n_exts = exts;
}

/* Indexes one FileDescriptorProto as file number r->n_files. */
static int index_file(sluice__reflection *r, const uint8_t *data, size_t len) {
  const uint8_t *name, *pkg;
  size_t name_len, pkg_len;
  if (find_string(data, len, 1, &name, &name_len) < 0 || !name ||
      find_string(data, len, 2, &pkg, &pkg_len) < 0)
    return SLUICE_ERR_INVALID_ARG;
  char *fname = dup_n(name, name_len);
  if (!fname)
    return SLUICE_ERR_NOMEM;
  if (find_file(r, fname) != SIZE_MAX) {
    free(fname);
    return 0;
  }
  if (grow((void **)&r->files, &r->cap_files, r->n_files, sizeof *r->files) !=
      0) {
    free(fname);
    return SLUICE_ERR_NOMEM;
  }
  size_t f = r->n_files++;
  file *fl = &r->files[f];
  memset(fl, 0, sizeof *fl);
  fl->name = fname;
  fl->data = data;
  fl->len = len;
  char *scope = dup_n(pkg ? pkg : (const uint8_t *)"", pkg_len);
  if (!scope)
    return SLUICE_ERR_NOMEM;
  sluice__pb rr = {data, data + len};
  uint32_t num;
  int wt, rv, e = 0;
  const uint8_t *d;
  size_t n;
  uint64_t v;
  while (e == 0 && (rv = sluice__pb_field(&rr, &num, &wt, &d, &n, &v)) == 1) {
    if (wt != SLUICE__PB_LEN)
      continue;
    if (num == 3) {
      char **deps = sluice__realloc(fl->deps, (fl->n_deps + 1) * sizeof *deps);
      char *dep = deps ? dup_n(d, n) : NULL;
      if (deps)
        fl->deps = deps;
      if (!dep)
        e = SLUICE_ERR_NOMEM;
      else
        fl->deps[fl->n_deps++] = dep;
    } else if (num == 4) {
      e = index_message(r, scope, d, n, f, 0);
    } else if (num == 5) {
      e = index_enum(r, scope, d, n, f);
    } else if (num == 6) {
      e = index_service(r, scope, d, n, f);
    } else if (num == 7) {
      e = index_extension(r, scope, d, n, f);
    }
  }
  free(scope);
  return e;
}

int sluice__reflection_add(sluice__reflection *r,
                           const sluice_file_descriptor *files, size_t n) {
  size_t files0 = r->n_files, syms0 = r->n_syms, exts0 = r->n_exts;
  for (size_t i = 0; i < n; i++) {
    int e = files[i].data || !files[i].size
                ? index_file(r, files[i].data, files[i].size)
                : SLUICE_ERR_INVALID_ARG;
    if (e != 0) {
      drop_from(r, files0, syms0, exts0);
      return e;
    }
  }
  return 0;
}

/* The FileDescriptorProto inside a FileDescriptorSet of one file. */
static sluice_file_descriptor from_set(const unsigned char *set, size_t len) {
  sluice_file_descriptor fd = {NULL, 0};
  sluice__pb r = {set, set + len};
  uint32_t num;
  int wt;
  const uint8_t *d;
  size_t n;
  uint64_t v;
  while (sluice__pb_field(&r, &num, &wt, &d, &n, &v) == 1)
    if (num == 1 && wt == SLUICE__PB_LEN && !fd.data) {
      fd.data = d;
      fd.size = n;
    }
  return fd;
}

int sluice__reflection_new(sluice__reflection **out) {
  sluice__reflection *r = sluice__calloc(1, sizeof *r);
  if (!r)
    return SLUICE_ERR_NOMEM;
  const sluice_file_descriptor own[3] = {
      from_set(sluice__fd_health, sluice__fd_health_size),
      from_set(sluice__fd_reflection_v1, sluice__fd_reflection_v1_size),
      from_set(sluice__fd_reflection_v1alpha,
               sluice__fd_reflection_v1alpha_size)};
  if (sluice__reflection_add(r, own, 3) != 0) {
    sluice__reflection_del(r);
    return SLUICE_ERR_NOMEM;
  }
  *out = r;
  return 0;
}

void sluice__reflection_del(sluice__reflection *r) {
  if (!r)
    return;
  drop_from(r, 0, 0, 0);
  free(r->files);
  free(r->syms);
  free(r->exts);
  free(r);
}

/* ---- writing protobuf */

typedef struct wb {
  uint8_t *p;
  size_t n, cap;
  int failed;
} wb;

static void wb_put(wb *b, const void *data, size_t len) {
  if (b->failed)
    return;
  if (b->n + len > b->cap) {
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + len)
      c *= 2;
    uint8_t *p = sluice__realloc(b->p, c);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->p = p;
    b->cap = c;
  }
  if (len)
    memcpy(b->p + b->n, data, len);
  b->n += len;
}

static void wb_varint(wb *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      tmp[n] |= 0x80;
    n++;
  } while (v);
  wb_put(b, tmp, n);
}

static void wb_len(wb *b, uint32_t num, const void *data, size_t len) {
  wb_varint(b, ((uint64_t)num << 3) | SLUICE__PB_LEN);
  wb_varint(b, len);
  wb_put(b, data, len);
}

static void wb_str(wb *b, uint32_t num, const char *s) {
  wb_len(b, num, s, strlen(s));
}

/* ---- the messages: no fields, everything unknown (see the top) */

typedef struct raw_msg {
  ProtobufCMessage base;
} raw_msg;

static const ProtobufCMessageDescriptor req_desc;
static const ProtobufCMessageDescriptor resp_desc;

static void req_init(ProtobufCMessage *m) {
  static const raw_msg init = {PROTOBUF_C_MESSAGE_INIT(&req_desc)};
  *(raw_msg *)m = init;
}

static void resp_init(ProtobufCMessage *m) {
  static const raw_msg init = {PROTOBUF_C_MESSAGE_INIT(&resp_desc)};
  *(raw_msg *)m = init;
}

static const ProtobufCIntRange no_ranges[1] = {{0, 0}};

static const ProtobufCMessageDescriptor req_desc = {
    PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    "grpc.reflection.v1.ServerReflectionRequest",
    "ServerReflectionRequest",
    "Grpc__Reflection__V1__ServerReflectionRequest",
    "grpc.reflection.v1",
    sizeof(raw_msg),
    0,
    NULL,
    NULL,
    0,
    no_ranges,
    req_init,
    NULL,
    NULL,
    NULL};
static const ProtobufCMessageDescriptor resp_desc = {
    PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    "grpc.reflection.v1.ServerReflectionResponse",
    "ServerReflectionResponse",
    "Grpc__Reflection__V1__ServerReflectionResponse",
    "grpc.reflection.v1",
    sizeof(raw_msg),
    0,
    NULL,
    NULL,
    0,
    no_ranges,
    resp_init,
    NULL,
    NULL,
    NULL};

#define V1_SERVICE "grpc.reflection.v1.ServerReflection"
#define V1ALPHA_SERVICE "grpc.reflection.v1alpha.ServerReflection"

static const sluice_method_desc v1_methods[1] = {
    {"/" V1_SERVICE "/ServerReflectionInfo", "ServerReflectionInfo", &req_desc,
     &resp_desc, SLUICE_CALL_BIDI_STREAMING, 0, 0, 0, NULL},
};
static const sluice_method_desc v1alpha_methods[1] = {
    {"/" V1ALPHA_SERVICE "/ServerReflectionInfo", "ServerReflectionInfo",
     &req_desc, &resp_desc, SLUICE_CALL_BIDI_STREAMING, 0, 0, 0, NULL},
};
static const sluice_service_desc v1_service = {V1_SERVICE, 1, v1_methods};
static const sluice_service_desc v1alpha_service = {V1ALPHA_SERVICE, 1,
                                                    v1alpha_methods};

/* ---- answering */

/* error_response (field 7) { error_code = 1, error_message = 2 }. */
static void put_error(wb *b, int code, const char *what, const char *name) {
  wb e = {0};
  wb_varint(&e, (1u << 3) | SLUICE__PB_VARINT);
  wb_varint(&e, (uint64_t)code);
  wb_varint(&e, (2u << 3) | SLUICE__PB_LEN);
  size_t wl = strlen(what), nl = strlen(name);
  wb_varint(&e, wl + nl);
  wb_put(&e, what, wl);
  wb_put(&e, name, nl);
  if (e.failed)
    b->failed = 1;
  else
    wb_len(b, 7, e.p, e.n);
  free(e.p);
}

/* file_descriptor_response (field 4): file f and its transitive imports
 * (those the index has), each once, f first. */
static void put_files(const sluice__reflection *r, wb *b, size_t f) {
  size_t *order = sluice__malloc(r->n_files * sizeof *order);
  unsigned char *seen = sluice__calloc(r->n_files, 1);
  if (!order || !seen) {
    free(order);
    free(seen);
    b->failed = 1;
    return;
  }
  size_t n = 0;
  order[n++] = f;
  seen[f] = 1;
  for (size_t i = 0; i < n; i++) {
    const file *fl = &r->files[order[i]];
    for (size_t j = 0; j < fl->n_deps; j++) {
      size_t d = find_file(r, fl->deps[j]);
      if (d != SIZE_MAX && !seen[d]) {
        seen[d] = 1;
        order[n++] = d;
      }
    }
  }
  wb fr = {0};
  for (size_t i = 0; i < n; i++)
    wb_len(&fr, 1, r->files[order[i]].data, r->files[order[i]].len);
  if (fr.failed)
    b->failed = 1;
  else
    wb_len(b, 4, fr.p, fr.n);
  free(fr.p);
  free(order);
  free(seen);
}

static int service_listed(const sluice__routes *routes, size_t upto,
                          const char *svc, size_t len) {
  for (size_t i = 0; i < upto; i++) {
    const char *p = routes->v[i].method->path + 1;
    const char *slash = strchr(p, '/');
    if (slash && (size_t)(slash - p) == len && memcmp(p, svc, len) == 0)
      return 1;
  }
  return 0;
}

/* list_services_response (field 6): each service of the routes once. */
static void put_services(const sluice__reflection *r, wb *b) {
  wb ls = {0};
  const sluice__routes *routes = r->routes;
  for (size_t i = 0; routes && i < routes->n; i++) {
    const char *path = routes->v[i].method->path;
    if (!path || path[0] != '/')
      continue;
    const char *p = path + 1;
    const char *slash = strchr(p, '/');
    if (!slash || service_listed(routes, i, p, (size_t)(slash - p)))
      continue;
    wb one = {0};
    wb_len(&one, 1, p, (size_t)(slash - p));
    if (one.failed)
      ls.failed = 1;
    else
      wb_len(&ls, 1, one.p, one.n);
    free(one.p);
  }
  if (ls.failed)
    b->failed = 1;
  else
    wb_len(b, 6, ls.p, ls.n);
  free(ls.p);
}

static size_t find_symbol(const sluice__reflection *r, const char *name) {
  if (name[0] == '.')
    name++;
  for (size_t i = 0; i < r->n_syms; i++)
    if (strcmp(r->syms[i].name, name) == 0)
      return r->syms[i].file;
  return SIZE_MAX;
}

static void put_extension_numbers(const sluice__reflection *r, wb *b,
                                  const char *type) {
  const char *t = type[0] == '.' ? type + 1 : type;
  wb en = {0};
  wb_str(&en, 1, t);
  for (size_t i = 0; i < r->n_exts; i++)
    if (strcmp(r->exts[i].extendee, t) == 0) {
      wb_varint(&en, (2u << 3) | SLUICE__PB_VARINT);
      wb_varint(&en, (uint64_t)(int64_t)r->exts[i].number);
    }
  if (en.failed)
    b->failed = 1;
  else
    wb_len(b, 5, en.p, en.n);
  free(en.p);
}

/* The response to one request, its fields into b: valid_host,
 * original_request, and the answer (an error_response when the name is
 * unknown or the request says nothing). */
static void answer(const sluice__reflection *r, const raw_msg *req, wb *b) {
  const uint8_t *host = NULL, *arg = NULL;
  size_t host_len = 0, arg_len = 0;
  uint32_t kind = 0;
  for (size_t i = 0; i < req->base.n_unknown_fields; i++) {
    const ProtobufCMessageUnknownField *u = &req->base.unknown_fields[i];
    if (u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)
      continue;
    sluice__pb lr = {u->data, u->data + u->len};
    uint64_t n;
    if (sluice__pb_varint(&lr, &n) != 0 || n != (uint64_t)(lr.end - lr.p))
      continue; /* cannot happen: protobuf-c checked it */
    if (u->tag == 1) {
      host = lr.p;
      host_len = (size_t)n;
    } else if (u->tag >= 3 && u->tag <= 7) {
      kind = u->tag; /* a oneof: the last one wins */
      arg = lr.p;
      arg_len = (size_t)n;
    }
  }
  wb_len(b, 1, host, host_len);
  /* original_request: the request as it came (protobuf-c writes the
   * unknown fields back verbatim). */
  size_t olen = protobuf_c_message_get_packed_size(&req->base);
  uint8_t *orig = sluice__malloc(olen ? olen : 1);
  if (!orig) {
    b->failed = 1;
    return;
  }
  protobuf_c_message_pack(&req->base, orig);
  wb_len(b, 2, orig, olen);
  free(orig);

  char *name = NULL;
  int32_t number = 0;
  if (kind == 5) { /* ExtensionRequest { containing_type = 1, number = 2 } */
    sluice__pb er = {arg, arg + arg_len};
    uint32_t num;
    int wt, rv;
    const uint8_t *d;
    size_t n;
    uint64_t v;
    const uint8_t *type = NULL;
    size_t type_len = 0;
    while ((rv = sluice__pb_field(&er, &num, &wt, &d, &n, &v)) == 1) {
      if (num == 1 && wt == SLUICE__PB_LEN) {
        type = d;
        type_len = n;
      } else if (num == 2 && wt == SLUICE__PB_VARINT) {
        number = (int32_t)v;
      }
    }
    if (rv < 0) {
      put_error(b, SLUICE_STATUS_INVALID_ARGUMENT,
                "malformed file_containing_extension", "");
      return;
    }
    name = dup_n(type ? type : (const uint8_t *)"", type_len);
  } else if (kind) {
    name = dup_n(arg, arg_len);
  }
  if (kind && !name) {
    b->failed = 1;
    return;
  }
  size_t f = SIZE_MAX;
  switch (kind) {
  case 3: /* file_by_filename */
    f = find_file(r, name);
    if (f == SIZE_MAX)
      put_error(b, SLUICE_STATUS_NOT_FOUND, "file not found: ", name);
    else
      put_files(r, b, f);
    break;
  case 4: /* file_containing_symbol */
    f = find_symbol(r, name);
    if (f == SIZE_MAX)
      put_error(b, SLUICE_STATUS_NOT_FOUND, "symbol not found: ", name);
    else
      put_files(r, b, f);
    break;
  case 5: { /* file_containing_extension */
    const char *t = name[0] == '.' ? name + 1 : name;
    for (size_t i = 0; i < r->n_exts && f == SIZE_MAX; i++)
      if (r->exts[i].number == number && strcmp(r->exts[i].extendee, t) == 0)
        f = r->exts[i].file;
    if (f == SIZE_MAX)
      put_error(b, SLUICE_STATUS_NOT_FOUND, "extension not found: ", name);
    else
      put_files(r, b, f);
    break;
  }
  case 6: /* all_extension_numbers_of_type */
    if (find_symbol(r, name) == SIZE_MAX)
      put_error(b, SLUICE_STATUS_NOT_FOUND, "type not found: ", name);
    else
      put_extension_numbers(r, b, name);
    break;
  case 7: /* list_services */
    put_services(r, b);
    break;
  default:
    put_error(b, SLUICE_STATUS_INVALID_ARGUMENT, "the request asks for nothing",
              "");
    break;
  }
  free(name);
}

/* ---- the streams */

/* A response that did not fit the send queue yet. */
typedef struct pending {
  struct pending *next;
  wb b;
} pending;

typedef struct stream {
  sluice__reflection *r;
  pending *head, **tail; /* responses waiting for on_send_ready */
  int half_closed;
  int finished;
  int paused; /* requests paused while answers wait: a client that does
                 not read is held back by flow control, not by our memory */
} stream;

/* Sends b's bytes as a response; 0, SLUICE_ERR_FULL or another error. */
static int send_raw(sluice_server_call *call, wb *b) {
  raw_msg m;
  resp_init(&m.base);
  /* Each field of b becomes one unknown field of an empty message. */
  sluice__pb rr = {b->p, b->p + b->n};
  size_t n = 0;
  ProtobufCMessageUnknownField *v = NULL;
  uint32_t num;
  int wt;
  const uint8_t *d;
  size_t len;
  uint64_t val;
  const uint8_t *at = rr.p;
  while (sluice__pb_field(&rr, &num, &wt, &d, &len, &val) == 1) {
    ProtobufCMessageUnknownField *nv = sluice__realloc(v, (n + 1) * sizeof *nv);
    if (!nv) {
      free(v);
      return SLUICE_ERR_NOMEM;
    }
    v = nv;
    /* data: the bytes after the key (the length prefix included). */
    sluice__pb key = {at, rr.p};
    uint64_t k;
    sluice__pb_varint(&key, &k);
    v[n].tag = num;
    v[n].wire_type = (ProtobufCWireType)wt;
    v[n].len = (size_t)(rr.p - key.p);
    v[n].data = (uint8_t *)key.p;
    n++;
    at = rr.p;
  }
  m.base.n_unknown_fields = (unsigned)n;
  m.base.unknown_fields = v;
  int rv = sluice_server_call_send(call, &m.base);
  free(v);
  return rv;
}

static void finish_once(sluice_server_call *call, stream *s,
                        sluice_status_code code, const char *msg) {
  if (s->finished)
    return;
  s->finished = 1;
  sluice_server_call_finish(call, code, msg, NULL);
}

/* Sends what waits, in order, until the queue is full. */
static void flush(sluice_server_call *call, stream *s) {
  while (s->head && !s->finished) {
    pending *p = s->head;
    int rv = send_raw(call, &p->b);
    if (rv == SLUICE_ERR_FULL) {
      if (!s->paused) {
        s->paused = 1;
        sluice_server_call_set_recv_paused(call, 1);
      }
      return;
    }
    s->head = p->next;
    if (!s->head)
      s->tail = &s->head;
    free(p->b.p);
    free(p);
    if (rv == SLUICE_ERR_STATE)
      return; /* over: on_done follows */
    if (rv != 0) {
      finish_once(call, s,
                  rv == SLUICE_ERR_TOO_LARGE ? SLUICE_STATUS_RESOURCE_EXHAUSTED
                                             : SLUICE_STATUS_INTERNAL,
                  rv == SLUICE_ERR_TOO_LARGE ? "response too large"
                                             : "out of memory");
      return;
    }
  }
  if (!s->head && s->paused && !s->finished) {
    s->paused = 0;
    sluice_server_call_set_recv_paused(call, 0);
  }
  if (!s->head && s->half_closed)
    finish_once(call, s, SLUICE_STATUS_OK, NULL);
}

static void on_message(sluice_server_call *call, const ProtobufCMessage *msg,
                       void *ud) {
  stream *s = ud;
  if (s->finished)
    return;
  pending *p = sluice__calloc(1, sizeof *p);
  if (!p) {
    finish_once(call, s, SLUICE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  answer(s->r, (const raw_msg *)msg, &p->b);
  if (p->b.failed) {
    free(p->b.p);
    free(p);
    finish_once(call, s, SLUICE_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  *s->tail = p;
  s->tail = &p->next;
  flush(call, s);
}

static void on_half_close(sluice_server_call *call, void *ud) {
  stream *s = ud;
  s->half_closed = 1;
  flush(call, s);
}

static void on_send_ready(sluice_server_call *call, void *ud) {
  flush(call, ud);
}

static void on_done(sluice_server_call *call, int cancelled, void *ud) {
  (void)cancelled;
  stream *s = ud;
  finish_once(call, s, SLUICE_STATUS_CANCELLED, "");
  while (s->head) {
    pending *p = s->head;
    s->head = p->next;
    free(p->b.p);
    free(p);
  }
  free(s);
}

static void info(sluice_server_call *call, const ProtobufCMessage *req,
                 const void *handlers, void *user_data) {
  (void)req;
  (void)handlers;
  stream *s = sluice__calloc(1, sizeof *s);
  if (!s) {
    sluice_server_call_finish(call, SLUICE_STATUS_RESOURCE_EXHAUSTED,
                              "out of memory", NULL);
    return;
  }
  s->r = user_data;
  s->tail = &s->head;
  static const sluice_server_call_handlers hs = {on_message, on_half_close,
                                                 on_send_ready, on_done};
  if (sluice_server_call_set_handlers(call, &hs, s) != 0) {
    free(s);
    sluice_server_call_finish(call, SLUICE_STATUS_INTERNAL, "", NULL);
  }
  /* From here on on_done frees s. */
}

int sluice__reflection_register(sluice__reflection *r, sluice__routes *routes,
                                const sluice_server_opts *o) {
  static const sluice_method_dispatch dispatch[1] = {info};
  r->routes = routes;
  const sluice_service_desc *svcs[2] = {&v1_service, &v1alpha_service};
  for (int i = 0; i < 2; i++) {
    int rv = sluice__routes_add(routes, svcs[i], dispatch, NULL, NULL, 0, r, o);
    if (rv != 0 && rv != SLUICE_ERR_DUPLICATE) /* the application's wins */
      return rv;
  }
  return 0;
}
