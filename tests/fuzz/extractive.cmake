# -- extractive LLM provider: text splitting, BM25, plans, tool results ---------
# Every source of the provider's logic, instrumented, but the module's entry
# (plugin.cpp) and the provider class around the logic (provider.cpp).

file(GLOB QUARRY_FUZZ_EXTRACTIVE_SOURCES CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/plugins/llm_extractive/*.cpp")
list(FILTER QUARRY_FUZZ_EXTRACTIVE_SOURCES EXCLUDE
     REGEX "/(plugin|provider)\\.cpp$")
quarry_add_fuzzer(quarry_fuzz_extractive
  SOURCES "${CMAKE_CURRENT_SOURCE_DIR}/extractive_fuzz.cpp"
          ${QUARRY_FUZZ_EXTRACTIVE_SOURCES}
  INCLUDES "${PROJECT_SOURCE_DIR}/plugins/llm_extractive"
  LIBRARIES quarry::sdk quarry::lexical nlohmann_json::nlohmann_json)
