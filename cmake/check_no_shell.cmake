# Fails when a source file under ROOT starts a shell: system(), popen() or the exec*p family with a
# built command line, through which a user's string (a folder, a label) could become a command.
# Programs are run with kvc::run_program (util/subprocess.h), which passes arguments without a shell.
# Usage: cmake -DROOT=<folder> -P check_no_shell.cmake
cmake_policy(SET CMP0007 NEW)
file(GLOB_RECURSE sources "${ROOT}/*.cpp" "${ROOT}/*.h" "${ROOT}/*.cu")
set(found "")
foreach(source IN LISTS sources)
  file(STRINGS "${source}" lines)
  set(number 0)
  foreach(line IN LISTS lines)
    math(EXPR number "${number} + 1")
    string(REGEX REPLACE "//.*$" "" code "${line}")
    if(code MATCHES "(^|[^A-Za-z0-9_.>])(std)?(::)?(system|popen|execl|execlp)[ ]*\\(")
      file(RELATIVE_PATH relative "${ROOT}" "${source}")
      list(APPEND found "${relative}:${number}: ${line}")
    endif()
  endforeach()
endforeach()
if(found)
  list(JOIN found "\n" report)
  message(FATAL_ERROR "a shell is started here (use kvc::run_program):\n${report}")
endif()
message(STATUS "no shell: ${ROOT}")
