# -- HTML main-content extraction, charset decoding and sniffing ---------------

find_package(PkgConfig REQUIRED)
pkg_check_modules(GUMBO REQUIRED IMPORTED_TARGET gumbo)
quarry_add_fuzzer(quarry_fuzz_content_extract
  SOURCES "${CMAKE_CURRENT_SOURCE_DIR}/content_extract_fuzz.cpp"
          "${PROJECT_SOURCE_DIR}/plugins/content_extract/content_extract.cpp"
          "${PROJECT_SOURCE_DIR}/plugins/content_extract/content_extract_charset.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/plugins/content_extract"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json PkgConfig::GUMBO)
