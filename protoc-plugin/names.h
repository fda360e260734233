/* protoc-gen-sluice: C names, computed exactly as protoc-c computes them.
 *
 * The generated stubs sit next to protoc-c's message code and refer to its
 * types and descriptors by name, so these functions must agree with protoc-c
 * (protobuf-c 1.4, protoc-c/c_helpers.cc) character for character:
 *
 *   full_to_c("a.b_c.HelloRequest")    "A__BC__HelloRequest"   (types)
 *   full_to_lower("a.b_c.HelloRequest") "a__b_c__hello_request" (functions)
 *   camel_to_lower("SayHello")          "say_hello"
 *
 * A leading '.' (as in the resolved type names protoc hands plugins) is
 * ignored, as are empty pieces. All returned strings are malloc()ed and owned
 * by the caller; NULL means out of memory.
 */
#ifndef SLUICE_PLUGIN_NAMES_H
#define SLUICE_PLUGIN_NAMES_H

/* protoc-c's CamelToLower: an '_' before every upper-case letter that follows
 * a non-upper-case one, then everything lower-cased ("HTTPGet" -> "httpget",
 * "Get2Things" -> "get2_things"). */
char *names_camel_to_lower(const char *name);

/* protoc-c's CamelToUpper, the macro flavour ("SayHello" -> "SAY_HELLO"). */
char *names_camel_to_upper(const char *name);

/* protoc-c's FullNameToC: dotted pieces in ToCamel form ('_' dropped, the
 * letter after it and the first letter upper-cased), joined by "__". */
char *names_full_to_c(const char *full_name);

/* protoc-c's FullNameToLower: CamelToLower of each piece, joined by "__". */
char *names_full_to_lower(const char *full_name);

/* protoc-c's FullNameToUpper: CamelToUpper of each piece, joined by "__". */
char *names_full_to_upper(const char *full_name);

/* "a/b.proto" -> "a/b" (protoc-c's StripProto; ".protodevel" too). */
char *names_strip_proto(const char *file_name);

/* A token for include guards: letters and digits kept, anything else
 * replaced by '_' and its hex code, so distinct paths give distinct guards. */
char *names_file_identifier(const char *file_name);

/* Non-zero when name is a keyword of C (up to C23) or C++, i.e. cannot be a
 * struct member or parameter in a header that either language includes. */
int names_is_keyword(const char *name);

/* Non-zero when name is a C keyword (up to C23). */
int names_is_c_keyword(const char *name);

#endif
