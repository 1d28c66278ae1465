# quarry_add_plugin(<name>
#                   SOURCES <file>...
#                   [LIBRARIES <target>...]
#                   [OUTPUT_DIRECTORY <dir>]
#                   [INSTALL_DESTINATION <dir>]
#                   [NO_INSTALL])
#
# Builds a Quarry plugin: a shared module named `quarry_<name>.so` that links
# the SDK, hides every symbol except the entry point (QUARRY_PLUGIN), and fails
# to link when a symbol is unresolved instead of failing when it is loaded.

include_guard(GLOBAL)

function(quarry_add_plugin name)
  cmake_parse_arguments(arg "NO_INSTALL"
                        "OUTPUT_DIRECTORY;INSTALL_DESTINATION"
                        "SOURCES;LIBRARIES" ${ARGN})
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "quarry_add_plugin(${name}): SOURCES missing")
  endif()
  add_library(${name} MODULE ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE quarry::sdk ${arg_LIBRARIES})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "quarry_${name}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${name} PRIVATE cxx_std_17)
  if(NOT CMAKE_SYSTEM_NAME STREQUAL "Darwin")
    target_link_options(${name} PRIVATE "LINKER:--no-undefined")
  endif()
  if(arg_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY "${arg_OUTPUT_DIRECTORY}")
  elseif(DEFINED QUARRY_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY "${QUARRY_PLUGIN_OUTPUT_DIR}")
  endif()
  if(NOT arg_NO_INSTALL)
    if(arg_INSTALL_DESTINATION)
      set(dest "${arg_INSTALL_DESTINATION}")
    elseif(DEFINED QUARRY_INSTALL_PLUGINDIR)
      set(dest "${QUARRY_INSTALL_PLUGINDIR}")
    else()
      include(GNUInstallDirs)
      set(dest "${CMAKE_INSTALL_LIBDIR}/quarry/plugins")
    endif()
    install(TARGETS ${name} LIBRARY DESTINATION "${dest}" COMPONENT plugins)
  endif()
endfunction()
