# libFuzzer target for the web_search plugins' response parsers (Brave,
# Tavily, SearXNG, Exa, Serper) and the shared cleaning, interleaving and
# rendering code.

set(QUARRY_WS_DIR "${PROJECT_SOURCE_DIR}/plugins")
quarry_add_fuzzer(quarry_fuzz_web_search
  SOURCES web_search_fuzz.cpp
          "${QUARRY_WS_DIR}/web_search_common/web_search_common.cpp"
          "${QUARRY_WS_DIR}/web_search_common/web_search_tool.cpp"
          "${QUARRY_WS_DIR}/web_search_brave/brave_search.cpp"
          "${QUARRY_WS_DIR}/web_search_tavily/tavily_search.cpp"
          "${QUARRY_WS_DIR}/web_search_searxng/searxng_search.cpp"
          "${QUARRY_WS_DIR}/web_search_exa/exa_search.cpp"
          "${QUARRY_WS_DIR}/web_search_serper/serper_search.cpp"
  INCLUDES "${QUARRY_WS_DIR}/web_search_common"
           "${QUARRY_WS_DIR}/web_search_brave"
           "${QUARRY_WS_DIR}/web_search_tavily"
           "${QUARRY_WS_DIR}/web_search_searxng"
           "${QUARRY_WS_DIR}/web_search_exa"
           "${QUARRY_WS_DIR}/web_search_serper"
  LIBRARIES quarry::sdk nlohmann_json::nlohmann_json)
