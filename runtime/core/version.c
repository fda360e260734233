/* The run-time version (sluice/version.h). The string is built from the
 * header's macros so the two cannot disagree. */
#include <sluice/version.h>

#define SLUICE__STR2(x) #x
#define SLUICE__STR(x) SLUICE__STR2(x)

const char *sluice_version(void) {
  return SLUICE__STR(SLUICE_VERSION_MAJOR) "." SLUICE__STR(
      SLUICE_VERSION_MINOR) "." SLUICE__STR(SLUICE_VERSION_PATCH);
}

unsigned sluice_version_hex(void) { return SLUICE_VERSION_HEX; }
