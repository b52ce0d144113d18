# Writes the built-in chat templates (TEMPLATE_DIR/*.jinja, by file name without .jinja) into OUTPUT as
# C++ byte arrays and a kBuiltinTemplates table, for lib/chat/builtin_templates.cpp to include.
#
# Script mode:  cmake -DTEMPLATE_DIR=<folder> -DOUTPUT=<file.inc> -P embed_chat_templates.cmake
file(GLOB templates ${TEMPLATE_DIR}/*.jinja)
list(SORT templates)
if(NOT templates)
  message(FATAL_ERROR "No chat templates in ${TEMPLATE_DIR}")
endif()
set(arrays "")
set(table "")
set(index 0)
foreach(path ${templates})
  get_filename_component(name ${path} NAME_WLE)
  file(READ ${path} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "const unsigned char kTemplate${index}[] = {${bytes}0x00};\n")
  string(APPEND table "    {\"${name}\", kTemplate${index}, sizeof(kTemplate${index}) - 1},\n")
  math(EXPR index "${index} + 1")
endforeach()
set(content "// Generated from data/chat_templates/*.jinja by cmake/embed_chat_templates.cmake; do not edit.\n")
string(APPEND content "${arrays}const BuiltinTemplate kBuiltinTemplates[] = {\n${table}};\n")
# Rewriting an unchanged file would only recompile its includer.
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} previous)
endif()
if(NOT previous STREQUAL content)
  file(WRITE ${OUTPUT} "${content}")
endif()
