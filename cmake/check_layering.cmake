# Checks that every file under a library folder includes only its own folder and the folders its layer
# depends on (directly or through other layers). A cycle between folders is therefore an error here,
# whatever order the linker happens to see the libraries in.
#
# Script mode:  cmake -DLAYERS=<manifest> -DROOT=<lib folder> -P check_layering.cmake
# The manifest sets KVC_LAYERS (layer names, lowest first) and, per layer NAME, KVC_LAYER_DIRS_NAME and
# KVC_LAYER_DEPS_NAME (layers it links). lib/CMakeLists.txt writes it; the tests run this script on the
# real tree and on a tree with a cycle, which must fail.

function(kvc_allowed_dirs layer out)
  set(dirs ${KVC_LAYER_DIRS_${layer}})
  foreach(dep ${KVC_LAYER_DEPS_${layer}})
    kvc_allowed_dirs(${dep} dep_dirs)
    list(APPEND dirs ${dep_dirs})
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  set(${out} ${dirs} PARENT_SCOPE)
endfunction()

function(kvc_check_layering root)
  set(violations "")
  set(known_dirs "")
  foreach(layer ${KVC_LAYERS})
    list(APPEND known_dirs ${KVC_LAYER_DIRS_${layer}})
  endforeach()
  foreach(layer ${KVC_LAYERS})
    kvc_allowed_dirs(${layer} allowed)
    foreach(dir ${KVC_LAYER_DIRS_${layer}})
      file(GLOB sources ${root}/${dir}/*.h ${root}/${dir}/*.cpp ${root}/${dir}/*.cu)
      foreach(source ${sources})
        file(STRINGS ${source} includes REGEX "^#include \"[a-z_0-9]+/")
        foreach(line ${includes})
          string(REGEX REPLACE "^#include \"([a-z_0-9]+)/([^\"]*)\".*" "\\1" used "${line}")
          string(REGEX REPLACE "^#include \"([a-z_0-9]+/[^\"]*)\".*" "\\1" header "${line}")
          list(FIND known_dirs ${used} is_lib_dir)
          list(FIND allowed ${used} is_allowed)
          if(is_lib_dir GREATER -1 AND is_allowed EQUAL -1)
            file(RELATIVE_PATH rel ${root} ${source})
            string(REPLACE ";" ", " allowed_text "${allowed}")
            string(APPEND violations "  ${rel} includes ${header}: layer ${layer} may use only ${allowed_text}\n")
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
  if(violations)
    message(FATAL_ERROR "Layering violated (lib/CMakeLists.txt lists each layer's dependencies; move the code "
                        "down a layer or depend on an interface):\n${violations}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND LAYERS)
  include(${LAYERS})
  kvc_check_layering(${ROOT})
  message(STATUS "Layering holds: ${KVC_LAYERS}")
endif()
