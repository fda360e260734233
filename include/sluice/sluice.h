/* sluice: umbrella header. Include this one. */
#ifndef SLUICE_SLUICE_H
#define SLUICE_SLUICE_H

#include "sluice/call.h"
#include "sluice/channel.h"
#include "sluice/clock.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/server.h"
#include "sluice/status.h"
#include "sluice/tls.h"
#include "sluice/version.h"

#endif
