/* The resilience snapshot's own helpers: init and clear. The snapshot is
 * versioned as sluice_call_opts is (struct_size first), so both touch only
 * the bytes the caller's struct has; sluice_channel_get_resilience_stats()
 * itself lives with the other statistics (stats.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/channel.h"
#include "sluice/resilience.h"

void sluice_resilience_stats_init_sized(sluice_resilience_stats *s,
                                        size_t struct_size) {
  if (!s || struct_size < sizeof s->struct_size)
    return;
  memset(s, 0, struct_size < sizeof *s ? struct_size : sizeof *s);
  s->struct_size = struct_size;
}

void sluice_resilience_stats_clear(sluice_resilience_stats *s) {
  if (!s)
    return;
  /* 0 is a struct zeroed by hand: read as this layout */
  size_t size =
      s->struct_size && s->struct_size < sizeof *s ? s->struct_size : sizeof *s;
  size_t kept = s->struct_size;
  /* methods is malloc'd by sluice_channel_get_resilience_stats(); a
   * struct too short to hold it never had it filled */
  if (size >= offsetof(sluice_resilience_stats, methods) + sizeof s->methods)
    free(s->methods);
  memset(s, 0, size);
  s->struct_size = kept;
}
