# libFuzzer target of the report files: a model's report text (citations,
# links, Markdown) rendered as the Markdown and HTML files of quarry research.

quarry_add_fuzzer(quarry_fuzz_report_render
  SOURCES report_render_fuzz.cpp "${PROJECT_SOURCE_DIR}/app/report_render.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/app" "${CMARK_GFM_INCLUDE_DIR}"
  LIBRARIES quarry::corpus ${CMARK_GFM_LIBRARY})
