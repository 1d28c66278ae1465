# -- extractive LLM provider: text splitting, BM25, plans, tool results ---------

quarry_add_fuzzer(quarry_fuzz_extractive
  SOURCES "${CMAKE_CURRENT_SOURCE_DIR}/extractive_fuzz.cpp"
          "${PROJECT_SOURCE_DIR}/plugins/llm_extractive/extractive.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/plugins/llm_extractive"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json)
