# Runs protoc with protoc-gen-sluice only (no protoc-c) on one proto and
# checks the outcome, for inputs that cannot go through sluice_generate():
#   EXPECT=fail  protoc must fail and its message name the file and the
#                given MATCH regex
#   EXPECT=pass  protoc must succeed, the generated header match every
#                regex in MATCH and the generated source every regex in
#                SOURCE_MATCH, and neither of them any regex in NOMATCH,
#                and protoc's messages (its stderr: the plugin's
#                warnings) every regex in WARN_MATCH (all ;-lists)
# Variables: PROTOC, PLUGIN, PROTO_DIR, PROTO (relative to PROTO_DIR),
# IMPORT_DIRS (;-list), OUT, EXPECT, MATCH, SOURCE_MATCH, NOMATCH,
# WARN_MATCH.
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(flags)
foreach(d IN LISTS IMPORT_DIRS)
  list(APPEND flags -I${d})
endforeach()
execute_process(
  COMMAND ${PROTOC} --plugin=protoc-gen-sluice=${PLUGIN} --sluice_out=${OUT}
          -I${PROTO_DIR} ${flags} ${PROTO}
  WORKING_DIRECTORY ${PROTO_DIR}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
message(STATUS "protoc said: ${out}${err}")
if(EXPECT STREQUAL "fail")
  if(rc EQUAL 0)
    message(FATAL_ERROR "protoc succeeded on ${PROTO}; expected a failure")
  endif()
  string(FIND "${err}" "${PROTO}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the error does not name ${PROTO}")
  endif()
  foreach(re IN LISTS MATCH)
    if(NOT err MATCHES "${re}")
      message(FATAL_ERROR "the error does not match '${re}'")
    endif()
  endforeach()
else()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "protoc failed on ${PROTO}")
  endif()
  string(REGEX REPLACE "\\.proto$" ".sluice.h" header "${PROTO}")
  string(REGEX REPLACE "\\.proto$" ".sluice.c" source "${PROTO}")
  file(READ ${OUT}/${header} text)
  file(READ ${OUT}/${source} source_text)
  foreach(re IN LISTS MATCH)
    if(NOT text MATCHES "${re}")
      message(FATAL_ERROR "${header} does not match '${re}'")
    endif()
  endforeach()
  foreach(re IN LISTS SOURCE_MATCH)
    if(NOT source_text MATCHES "${re}")
      message(FATAL_ERROR "${source} does not match '${re}'")
    endif()
  endforeach()
  foreach(re IN LISTS WARN_MATCH)
    if(NOT err MATCHES "${re}")
      message(FATAL_ERROR "protoc's messages do not match '${re}'")
    endif()
  endforeach()
  foreach(re IN LISTS NOMATCH)
    if(text MATCHES "${re}")
      message(FATAL_ERROR "${header} matches '${re}'")
    endif()
    if(source_text MATCHES "${re}")
      message(FATAL_ERROR "${source} matches '${re}'")
    endif()
  endforeach()
endif()
