/* Names and descriptions of the two error spaces, and the status lifecycle. */
#include <sluice/metadata.h>
#include <sluice/status.h>

#include <stdlib.h>

const char *sluice_status_name(sluice_status_code code) {
  switch (code) {
#define SLUICE_XX(name, num)                                                   \
  case SLUICE_STATUS_##name:                                                   \
    return #name;
    SLUICE_STATUS_MAP(SLUICE_XX)
#undef SLUICE_XX
  }
  return "UNKNOWN_CODE";
}

const char *sluice_strerror(int err) {
  switch (err) {
  case SLUICE_OK:
    return "success";
#define SLUICE_XX(name, num, text)                                             \
  case SLUICE_ERR_##name:                                                      \
    return text;
    SLUICE_ERRNO_MAP(SLUICE_XX)
#undef SLUICE_XX
  }
  return "unknown error";
}

void sluice_status_init(sluice_status *st) {
  if (st == NULL)
    return;
  st->code = SLUICE_STATUS_OK;
  st->message = NULL;
  st->initial_md = NULL;
  st->trailing_md = NULL;
}

void sluice_status_clear(sluice_status *st) {
  if (st == NULL)
    return;
  free(st->message);
  sluice_metadata_del(st->initial_md);
  sluice_metadata_del(st->trailing_md);
  sluice_status_init(st);
}
