# -- local corpus: FTS5 query sanitiser, passage splitter, file URLs ----------

find_package(SQLite3 REQUIRED)
quarry_add_fuzzer(quarry_fuzz_local_corpus
  SOURCES "${CMAKE_CURRENT_SOURCE_DIR}/local_corpus_fuzz.cpp"
          "${PROJECT_SOURCE_DIR}/core/corpus/src/text.cpp"
          "${PROJECT_SOURCE_DIR}/core/fetch/src/url/url.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/core/corpus/include"
           "${PROJECT_SOURCE_DIR}/core/fetch/include"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json SQLite::SQLite3
            CURL::libcurl)
