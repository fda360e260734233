# sluice_generate(TARGET tgt PROTOS a.proto ... [IMPORT_DIRS d ...]
#                 [OUT_DIR dir] [STATIC])
#
# Runs protoc once per proto with protoc-c (--c_out) and protoc-gen-sluice
# (--sluice_out), adds the generated .pb-c.c and .sluice.c files to tgt,
# OUT_DIR to its include directories and links it to the runtime
# sluice::sluice (PUBLIC; use the keyword form of target_link_libraries on
# tgt). The same from the source tree (add_subdirectory: the static
# library) and from an installed package (find_package: the shared one;
# STATIC links sluice::sluice_static instead).
#
# A proto below one of IMPORT_DIRS keeps its path relative to that dir
# ("a/b.proto" -> OUT_DIR/a/b.pb-c.h), so imports between files resolve the
# same way for protoc and for the C compiler; any other proto is named
# relative to its own directory. sluice/options.proto and the well-known
# types are found on their own. OUT_DIR defaults to
# ${CMAKE_CURRENT_BINARY_DIR}/sluice_gen/<tgt>.
include_guard(GLOBAL)

# Where sluice/options.proto lives and which plugin runs: the source tree
# and the in-tree protoc-gen-sluice here; the installed package config
# (sluiceConfig.cmake) sets SLUICE_PROTO_DIR to <prefix>/include and defines
# the imported executable sluice::protoc-gen-sluice before including this.
# Kept as global properties: the function runs in its caller's scope, which
# may be a parent project's (add_subdirectory) that never saw our variables.
if(NOT DEFINED SLUICE_PROTO_DIR)
  get_filename_component(SLUICE_PROTO_DIR "${CMAKE_CURRENT_LIST_DIR}/../proto"
                         ABSOLUTE)
endif()
set_property(GLOBAL PROPERTY SLUICE_PROTO_DIR "${SLUICE_PROTO_DIR}")
find_path(SLUICE_WKT_PROTO_DIR google/protobuf/descriptor.proto
          PATHS /usr/include /usr/local/include REQUIRED
          DOC "Directory holding protobuf's well-known .proto files")
find_program(PROTOC protoc REQUIRED)
find_program(PROTOC_GEN_C NAMES protoc-gen-c protoc-c REQUIRED)

function(sluice_generate)
  cmake_parse_arguments(SG "STATIC" "TARGET;OUT_DIR" "PROTOS;IMPORT_DIRS"
                        ${ARGN})
  if(NOT SG_TARGET OR NOT TARGET ${SG_TARGET})
    message(FATAL_ERROR "sluice_generate: TARGET must name an existing target")
  endif()
  if(NOT SG_PROTOS)
    message(FATAL_ERROR "sluice_generate: no PROTOS given")
  endif()
  if(SG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
            "sluice_generate: unknown arguments ${SG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT SG_OUT_DIR)
    set(SG_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/sluice_gen/${SG_TARGET})
  endif()
  get_filename_component(out "${SG_OUT_DIR}" ABSOLUTE
                         BASE_DIR ${CMAKE_CURRENT_BINARY_DIR})

  get_property(proto_dir GLOBAL PROPERTY SLUICE_PROTO_DIR)
  # In-tree the plugin is built first (a target-level dependency); from an
  # installed package it is a file on disk.
  if(TARGET protoc-gen-sluice)
    set(plugin_dep protoc-gen-sluice)
  else()
    set(plugin_dep $<TARGET_FILE:sluice::protoc-gen-sluice>)
  endif()

  set(import_dirs)
  set(import_flags)
  foreach(dir IN LISTS SG_IMPORT_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE)
    list(APPEND import_dirs ${dir})
    list(APPEND import_flags -I${dir})
  endforeach()

  # Every proto of this call, so that editing an imported one regenerates
  # its importers too.
  set(all_protos)
  foreach(proto IN LISTS SG_PROTOS)
    get_filename_component(abs "${proto}" ABSOLUTE)
    list(APPEND all_protos ${abs})
  endforeach()

  set(sources)
  foreach(abs IN LISTS all_protos)
    set(root)
    foreach(dir IN LISTS import_dirs)
      string(LENGTH "${dir}/" n)
      string(SUBSTRING "${abs}" 0 ${n} head)
      if(head STREQUAL "${dir}/")
        set(root ${dir})
        string(SUBSTRING "${abs}" ${n} -1 rel)
        break()
      endif()
    endforeach()
    if(NOT root)
      get_filename_component(root "${abs}" DIRECTORY)
      get_filename_component(rel "${abs}" NAME)
    endif()
    # Its code is in sluice_options, which `sluice` links publicly.
    if(rel STREQUAL "sluice/options.proto")
      continue()
    endif()
    string(REGEX REPLACE "\\.proto$" "" base "${rel}")
    set(outs ${out}/${base}.pb-c.c ${out}/${base}.pb-c.h
             ${out}/${base}.sluice.c ${out}/${base}.sluice.h)
    add_custom_command(
      OUTPUT ${outs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
      COMMAND ${PROTOC} --plugin=protoc-gen-c=${PROTOC_GEN_C}
              --plugin=protoc-gen-sluice=$<TARGET_FILE:sluice::protoc-gen-sluice>
              --c_out=${out} --sluice_out=${out}
              -I${root} ${import_flags} -I${proto_dir}
              -I${SLUICE_WKT_PROTO_DIR} ${rel}
      # rel is then both a disk path and the virtual name protoc uses.
      WORKING_DIRECTORY ${root}
      DEPENDS ${all_protos} ${plugin_dep} ${proto_dir}/sluice/options.proto
      COMMENT "sluice: generating code for ${rel}"
      VERBATIM)
    list(APPEND sources ${out}/${base}.pb-c.c ${out}/${base}.sluice.c)
  endforeach()

  target_sources(${SG_TARGET} PRIVATE ${sources})
  target_include_directories(${SG_TARGET} PUBLIC ${out})
  if(SG_STATIC)
    target_link_libraries(${SG_TARGET} PUBLIC sluice::sluice_static)
  else()
    target_link_libraries(${SG_TARGET} PUBLIC sluice::sluice)
  endif()
endfunction()
