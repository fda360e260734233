#include "transport/headers.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "wire/base64.h"
#include "wire/metadata_rules.h"

void sluice__nvs_init(sluice__nvs *h) {
  /* The inline array is not cleared: entries are written before use, and
   * zeroing 640 bytes twice per call showed in profiles. */
  h->n = 0;
  h->b64[0] = h->b64[1] = NULL;
  h->n_b64 = 0;
  h->failed = 0;
  h->nv = h->inline_nv;
  h->cap = sizeof h->inline_nv / sizeof h->inline_nv[0];
}

static int grow(sluice__nvs *h) {
  size_t cap = h->cap * 2;
  nghttp2_nv *nv = sluice__malloc(cap * sizeof *nv);
  if (!nv)
    return -1;
  memcpy(nv, h->nv, h->n * sizeof *nv);
  if (h->nv != h->inline_nv)
    free(h->nv);
  h->nv = nv;
  h->cap = cap;
  return 0;
}

void sluice__nvs_add(sluice__nvs *h, const char *name, size_t nlen,
                     const char *value, size_t vlen) {
  if (h->failed)
    return;
  if (h->n == h->cap && grow(h) != 0) {
    h->failed = 1;
    return;
  }
  nghttp2_nv *nv = &h->nv[h->n++];
  nv->name = (uint8_t *)name;
  nv->namelen = nlen;
  nv->value = (uint8_t *)value;
  nv->valuelen = vlen;
  nv->flags = NGHTTP2_NV_FLAG_NONE;
}

void sluice__nvs_no_index_last(sluice__nvs *h) {
  if (!h->failed && h->n)
    h->nv[h->n - 1].flags |= NGHTTP2_NV_FLAG_NO_INDEX;
}

void sluice__nvs_add_str(sluice__nvs *h, const char *name, const char *value) {
  sluice__nvs_add(h, name, strlen(name), value, strlen(value));
}

void sluice__nvs_add_md(sluice__nvs *h, const sluice_metadata *md) {
  size_t n = sluice_metadata_count(md);
  if (n == 0)
    return;
  /* One buffer for all encoded values, sized up front so that pointers
   * into it stay valid. */
  size_t need = 0;
  for (size_t i = 0; i < n; i++) {
    const char *k;
    const void *v;
    size_t vl;
    sluice_metadata_get(md, i, &k, &v, &vl);
    if (sluice__md_is_bin(k, strlen(k)))
      need += sluice__base64_encoded_len(vl) + 1;
  }
  char *p = NULL;
  if (need) {
    if (h->n_b64 == 2 || !(p = sluice__malloc(need))) {
      h->failed = 1;
      return;
    }
    h->b64[h->n_b64++] = p;
  }
  for (size_t i = 0; i < n; i++) {
    const char *k;
    const void *v;
    size_t vl;
    sluice_metadata_get(md, i, &k, &v, &vl);
    size_t kl = strlen(k);
    if (sluice__md_is_bin(k, kl)) {
      size_t el = sluice__base64_encode(v, vl, p);
      sluice__nvs_add(h, k, kl, p, el);
      p += el + 1;
    } else {
      sluice__nvs_add(h, k, kl, v, vl);
    }
  }
}

int sluice__nvs_failed(const sluice__nvs *h) { return h->failed; }

void sluice__nvs_free(sluice__nvs *h) {
  if (h->nv != h->inline_nv)
    free(h->nv);
  for (int i = 0; i < h->n_b64; i++)
    free(h->b64[i]);
  h->n_b64 = 0;
  h->nv = h->inline_nv;
}
