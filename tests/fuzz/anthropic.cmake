# libFuzzer target for the `anthropic` plugin's stream parsing: SSE bytes ->
# events -> assembler (with the reasoning state it encodes from thinking
# blocks), plus error bodies and non-streamed messages.

set(QUARRY_ANTHROPIC_DIR "${PROJECT_SOURCE_DIR}/plugins/llm_anthropic")
quarry_add_fuzzer(quarry_fuzz_anthropic
  SOURCES anthropic_fuzz.cpp
          "${QUARRY_ANTHROPIC_DIR}/anthropic_errors.cpp"
          "${QUARRY_ANTHROPIC_DIR}/anthropic_stream.cpp"
          "${QUARRY_ANTHROPIC_DIR}/anthropic_thinking.cpp"
  INCLUDES "${QUARRY_ANTHROPIC_DIR}"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json)
