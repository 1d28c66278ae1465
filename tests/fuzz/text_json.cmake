# libFuzzer target of the SDK's UTF-8 repair and depth-bounded JSON parsing,
# and of what builds on them in core: the byte-once JSON validator, tool-call
# arguments and the JSON forms of the LLM types.

quarry_add_fuzzer(quarry_fuzz_text_json
  SOURCES text_json_fuzz.cpp
          "${PROJECT_SOURCE_DIR}/core/src/tool_args.cpp"
          "${PROJECT_SOURCE_DIR}/core/src/json_check.cpp"
          "${PROJECT_SOURCE_DIR}/core/src/llm_json.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/core/include"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json)
