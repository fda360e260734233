/* Writes the files of a CodeGeneratorResponse (stdin) under DIR, for
 * tests/plugin/compile_requests.sh, which feeds fuzzer-found
 * CodeGeneratorRequests to protoc-c and protoc-gen-sluice directly and
 * compiles what both make. Exit 0: files written; 2: the plugin reported
 * an error (the text on stderr) or wrote nothing; 1: the bytes are not a
 * response, or a file name would leave DIR (absolute, or with a ".."
 * component) or cannot be written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "google/protobuf/compiler/plugin.pb-c.h"

typedef Google__Protobuf__Compiler__CodeGeneratorResponse response;

/* Reads all of stdin into *out (malloc'd); its length, or -1. */
static long read_all(uint8_t **out) {
  size_t cap = 1 << 16, n = 0;
  uint8_t *b = malloc(cap);
  while (b) {
    if (n == cap) {
      uint8_t *nb = realloc(b, cap *= 2);
      if (!nb)
        break;
      b = nb;
    }
    size_t got = fread(b + n, 1, cap - n, stdin);
    n += got;
    if (got == 0) {
      *out = b;
      return ferror(stdin) ? -1 : (long)n;
    }
  }
  free(b);
  return -1;
}

static int safe_name(const char *name) {
  if (!*name || name[0] == '/')
    return 0;
  for (const char *p = name; *p;) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.')
      return 0;
    p += len + (e != NULL);
  }
  return 1;
}

/* Creates the directories of path (a file's) under it. */
static int make_dirs(char *path) {
  for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
    *s = 0;
    int rc = mkdir(path, 0755);
    *s = '/';
    if (rc != 0 && errno != EEXIST)
      return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: write_response DIR < response\n");
    return 1;
  }
  uint8_t *buf = NULL;
  long n = read_all(&buf);
  response *r =
      n < 0 ? NULL
            : google__protobuf__compiler__code_generator_response__unpack(
                  NULL, (size_t)n, buf);
  free(buf);
  if (!r) {
    fprintf(stderr, "write_response: not a CodeGeneratorResponse\n");
    return 1;
  }
  int rc = 0;
  if (r->error || r->n_file == 0) {
    fprintf(stderr, "%s\n", r->error ? r->error : "(no files)");
    rc = 2;
  }
  for (size_t i = 0; rc == 0 && i < r->n_file; i++) {
    const char *name = r->file[i]->name;
    if (!name || !safe_name(name) || r->file[i]->insertion_point) {
      fprintf(stderr, "write_response: bad file name\n");
      rc = 1;
      break;
    }
    size_t len = strlen(argv[1]) + strlen(name) + 2;
    char *path = malloc(len);
    if (!path) {
      rc = 1;
      break;
    }
    snprintf(path, len, "%s/%s", argv[1], name);
    FILE *f = make_dirs(path) == 0 ? fopen(path, "w") : NULL;
    const char *text = r->file[i]->content ? r->file[i]->content : "";
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "write_response: cannot write %s\n", path);
      rc = 1;
    }
    free(path);
  }
  google__protobuf__compiler__code_generator_response__free_unpacked(r, NULL);
  return rc;
}
