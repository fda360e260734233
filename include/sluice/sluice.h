/** @file
 * sluice: umbrella header. Include this one.
 */

/** @mainpage sluice API reference
 *
 * sluice is a gRPC-compatible RPC framework in C (nghttp2, libuv, OpenSSL,
 * protobuf-c). Programs include sluice/sluice.h, which includes the rest:
 *
 * | header            | what                                              |
 * |-------------------|---------------------------------------------------|
 * | sluice/channel.h  | client channels, call options, unary calls, stats |
 * | sluice/call.h     | client calls of every kind through one handle     |
 * | sluice/server.h   | servers, admission limits, server calls           |
 * | sluice/tls.h      | TLS and mutual TLS for channels and servers       |
 * | sluice/metadata.h | custom metadata (headers and trailers)            |
 * | sluice/buf.h      | message buffers of raw (zero-copy) calls          |
 * | sluice/status.h   | call status codes and the API's error codes       |
 * | sluice/method.h   | method and service tables (generated code)        |
 * | sluice/clock.h    | the clock of deadlines                            |
 * | sluice/version.h  | the library's version                             |
 * | sluice/export.h   | the SLUICE_API marker                             |
 *
 * The typed stubs that protoc-gen-sluice writes for a .proto are
 * described in docs/generated-code.md; threads, ownership and flow control
 * in docs/architecture.md and docs/flow-control.md.
 *
 * Conventions of every function here: API functions return 0 or a
 * negative `SLUICE_ERR_*` value (sluice_strerror() describes it); the
 * outcome of an RPC is a sluice_status_code, never mixed with those.
 * Strings and buffers passed in are copied unless a function says they
 * are borrowed; what a function hands out is borrowed unless it says who
 * frees it and how.
 */
#ifndef SLUICE_SLUICE_H
#define SLUICE_SLUICE_H

#include "sluice/buf.h"
#include "sluice/call.h"
#include "sluice/channel.h"
#include "sluice/clock.h"
#include "sluice/metadata.h"
#include "sluice/method.h"
#include "sluice/resilience.h"
#include "sluice/server.h"
#include "sluice/status.h"
#include "sluice/tls.h"
#include "sluice/version.h"

#endif
