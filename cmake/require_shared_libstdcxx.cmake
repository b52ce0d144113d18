# PyPI's LibTorch exports a std::filesystem of its own; our programs avoid it by listing libstdc++ before
# LibTorch (CMakeLists.txt), which needs a shared libstdc++: a compiler that has only the static one
# links none of it before LibTorch, so LibTorch's copy would serve our calls and crash. Such a compiler
# is refused with such a LibTorch, in one line naming the fix.
#
# Script mode:  cmake -DKVC_TORCH_LIBRARY=<libtorch.so> -DKVC_CXX=<g++> -P require_shared_libstdcxx.cmake
# (the tests feed it a compiler without a shared libstdc++).

function(kvc_require_shared_libstdcxx torch_library cxx)
  execute_process(COMMAND nm -D --defined-only "${torch_library}" OUTPUT_VARIABLE symbols ERROR_QUIET)
  string(FIND "${symbols}" "_ZNSt10filesystem10remove_all" found)
  if(found EQUAL -1)
    return()
  endif()
  execute_process(COMMAND ${cxx} -print-file-name=libstdc++.so OUTPUT_VARIABLE shared OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${shared}" OR NOT EXISTS "${shared}")
    message(FATAL_ERROR "${cxx} has no shared libstdc++, and this LibTorch exports a std::filesystem of its own "
                        "that our programs would then call (and crash in); configure with a compiler that has "
                        "one, e.g. -DCMAKE_CXX_COMPILER=/usr/bin/g++")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  kvc_require_shared_libstdcxx("${KVC_TORCH_LIBRARY}" "${KVC_CXX}")
endif()
