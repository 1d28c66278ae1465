# libFuzzer target for open_url's pure parts and the SSRF address policy.

quarry_add_fuzzer(quarry_fuzz_open_url
  SOURCES "${CMAKE_CURRENT_SOURCE_DIR}/open_url_fuzz.cpp"
          "${PROJECT_SOURCE_DIR}/plugins/open_url/open_url_text.cpp"
          "${PROJECT_SOURCE_DIR}/core/fetch/src/address_policy.cpp"
          "${PROJECT_SOURCE_DIR}/core/fetch/src/url/url.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/plugins/open_url"
           "${PROJECT_SOURCE_DIR}/core/fetch/include"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json CURL::libcurl)
