# Finds the C++ Actor Framework (CAF) 0.17 as shipped by Debian, which has no
# CMake package configuration of its own.
#
# Components: core (always), io, openssl.
# Imported targets: CAF::core, CAF::io, CAF::openssl.
# Variables: CAF_FOUND, CAF_VERSION, CAF_INCLUDE_DIR.

find_path(CAF_INCLUDE_DIR NAMES caf/config.hpp)

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1"
         _caf_version_num "${_caf_version_line}")
  math(EXPR _caf_major "${_caf_version_num} / 10000")
  math(EXPR _caf_minor "(${_caf_version_num} / 100) % 100")
  math(EXPR _caf_patch "${_caf_version_num} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

set(_caf_components core ${CAF_FIND_COMPONENTS})
list(REMOVE_DUPLICATES _caf_components)
set(_caf_required_vars CAF_INCLUDE_DIR)
foreach(comp IN LISTS _caf_components)
  find_library(CAF_${comp}_LIBRARY NAMES caf_${comp})
  if(CAF_${comp}_LIBRARY)
    set(CAF_${comp}_FOUND TRUE)
  endif()
  list(APPEND _caf_required_vars CAF_${comp}_LIBRARY)
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS ${_caf_required_vars}
  VERSION_VAR CAF_VERSION
  HANDLE_COMPONENTS)

if(CAF_FOUND)
  find_package(Threads REQUIRED)
  if(NOT TARGET CAF::core)
    add_library(CAF::core SHARED IMPORTED)
    set_target_properties(CAF::core PROPERTIES
      IMPORTED_LOCATION "${CAF_core_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()
  if(CAF_io_LIBRARY AND NOT TARGET CAF::io)
    add_library(CAF::io SHARED IMPORTED)
    set_target_properties(CAF::io PROPERTIES
      IMPORTED_LOCATION "${CAF_io_LIBRARY}"
      INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
  if(CAF_openssl_LIBRARY AND NOT TARGET CAF::openssl)
    find_package(OpenSSL REQUIRED)
    add_library(CAF::openssl SHARED IMPORTED)
    set_target_properties(CAF::openssl PROPERTIES
      IMPORTED_LOCATION "${CAF_openssl_LIBRARY}"
      INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL;OpenSSL::Crypto")
  endif()
endif()

mark_as_advanced(CAF_INCLUDE_DIR CAF_core_LIBRARY CAF_io_LIBRARY
                 CAF_openssl_LIBRARY)
