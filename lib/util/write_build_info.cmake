# Run at every build (not only at configure time), so results name the commit the tools were built
# from; "+dirty" marks a working tree with uncommitted changes. Rewrites the output only on change.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty)
    set(commit "${commit}+dirty")
  endif()
endif()
set(content "#define KVC_BUILD_COMMIT \"${commit}\"\n#define KVC_BUILD_VERSION \"${VERSION}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} previous)
endif()
if(NOT "${previous}" STREQUAL "${content}")
  file(WRITE ${OUTPUT} "${content}")
endif()
