# -- HTML main-content extraction, charset decoding and sniffing ---------------

find_package(PkgConfig REQUIRED)
pkg_check_modules(GUMBO REQUIRED IMPORTED_TARGET gumbo)
pkg_check_modules(POPPLER_CPP REQUIRED IMPORTED_TARGET poppler-cpp)
pkg_check_modules(UCHARDET REQUIRED IMPORTED_TARGET uchardet)
file(GLOB QUARRY_FUZZ_EXTRACT_SOURCES CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/core/extract/src/*.cpp")
quarry_add_fuzzer(quarry_fuzz_content_extract
  SOURCES "${CMAKE_CURRENT_SOURCE_DIR}/content_extract_fuzz.cpp"
          ${QUARRY_FUZZ_EXTRACT_SOURCES}
          "${PROJECT_SOURCE_DIR}/core/fetch/src/url/url.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/core/extract/include"
           "${PROJECT_SOURCE_DIR}/core/fetch/include"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json PkgConfig::GUMBO
            PkgConfig::POPPLER_CPP PkgConfig::UCHARDET CURL::libcurl)
