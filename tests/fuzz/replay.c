/* The corpus regression without libFuzzer: a main() that calls a target's
 * LLVMFuzzerTestOneInput once for every file it is given, or for every file
 * of every directory it is given (not recursive). The normal gcc builds
 * link each target with it, so make test replays the checked-in corpora
 * (and every fixed finding) under plain and ASan+UBSan builds alike. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* libFuzzer calls it before the first input when a target defines it;
 * none of ours needs it, but a future target may. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(f);
      fprintf(stderr, "%s: out of memory\n", path);
      return -1;
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap)
      break;
    cap *= 2;
    buf = realloc(buf, cap);
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    fprintf(stderr, "%s: read error\n", path);
    return -1;
  }
  /* An exact-size copy: libFuzzer hands its targets exact-size buffers, and
   * ASan should catch an over-read here just as it does there. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's regular files, in name order so that a failure is
 * reproducible by position too. */
static int run_dir(const char *dir, size_t *count) {
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **grown = realloc(names, cap * sizeof *names);
      if (!grown)
        abort();
      names = grown;
    }
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    names[n] = malloc(len);
    if (!names[n])
      abort();
    snprintf(names[n], len, "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(names[i]) != 0)
        rc = -1;
      else
        (*count)++;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  size_t count = 0;
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      rc = 1;
    } else if (S_ISDIR(st.st_mode)) {
      if (run_dir(argv[i], &count) != 0)
        rc = 1;
    } else if (run_file(argv[i]) != 0) {
      rc = 1;
    } else {
      count++;
    }
  }
  /* An empty corpus would pass while testing nothing. */
  if (count == 0) {
    fprintf(stderr, "%s: no inputs\n", argv[0]);
    return 1;
  }
  printf("%s: %zu inputs replayed\n", argv[0], count);
  return rc;
}
