# libFuzzer target of the report files: a model's report text (citations,
# links, Markdown) rendered as the Markdown and HTML files of quarry research
# and as the text it prints on a terminal.
# The file-URL helpers it uses come from the corpus's text.cpp alone (the
# whole quarry::corpus would build the index, fetching and extraction too).

quarry_add_fuzzer(quarry_fuzz_report_render
  SOURCES report_render_fuzz.cpp "${PROJECT_SOURCE_DIR}/app/report_render.cpp"
          "${PROJECT_SOURCE_DIR}/core/corpus/src/text.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/app" "${PROJECT_SOURCE_DIR}/core/corpus/include"
           "${CMARK_GFM_INCLUDE_DIR}"
  LIBRARIES quarry::url ${CMARK_GFM_EXTENSIONS_LIBRARY} ${CMARK_GFM_LIBRARY})
