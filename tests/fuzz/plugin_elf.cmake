# libFuzzer target of the plugin registry's ELF reader (what the host reads
# from a plugin file before it loads it).

quarry_add_fuzzer(quarry_fuzz_plugin_elf
  SOURCES plugin_elf_fuzz.cpp
          "${PROJECT_SOURCE_DIR}/core/host/src/elf_symbols.cpp"
  INCLUDES "${PROJECT_SOURCE_DIR}/core/host/src")
