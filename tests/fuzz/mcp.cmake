# libFuzzer target of the Model Context Protocol core (`quarry mcp`): the
# stdio framing, the bounded JSON-RPC reading and the server's answers.

quarry_add_fuzzer(quarry_fuzz_mcp
  SOURCES mcp_fuzz.cpp
          "${PROJECT_SOURCE_DIR}/core/src/mcp.cpp"
          "${PROJECT_SOURCE_DIR}/core/src/tool_args.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/core/include"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json)
