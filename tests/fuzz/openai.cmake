# Fuzz target of the `openai` LLM plugin: SSE framing, chunk JSON, tool-call
# accumulation and error classification, on arbitrary bytes.

quarry_add_fuzzer(quarry_fuzz_openai
  SOURCES openai_fuzz.cpp
          "${PROJECT_SOURCE_DIR}/plugins/llm_openai/openai_stream.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/plugins/llm_openai"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json)
