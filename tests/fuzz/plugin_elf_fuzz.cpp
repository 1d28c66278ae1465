// libFuzzer target of the plugin registry's ELF reader: arbitrary bytes as a
// plugin file. The reader must never read outside the file or its tables,
// never allocate more than the file's size allows, and either list names or
// give a one-line reason. Seed it with real plugins (build/plugins/*.so):
// mutations of a valid header reach the section and symbol tables.

#include "elf_symbols.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>
#include <vector>

namespace {

// One scratch file per process (libFuzzer may run several), in $TMPDIR or
// /tmp, removed when the process ends normally.
struct scratch_file {
  std::string path;

  scratch_file() {
    const char* dir = std::getenv("TMPDIR");
    path = std::string{dir != nullptr && *dir != '\0' ? dir : "/tmp"} + "/quarry_fuzz_plugin_elf_"
           + std::to_string(::getpid()) + ".so";
  }
  scratch_file(const scratch_file&) = delete;
  scratch_file& operator=(const scratch_file&) = delete;
  ~scratch_file() {
    std::remove(path.c_str());
  }
};

const std::string& scratch_path() {
  static const scratch_file file;
  return file.path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& path = scratch_path();
  auto* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr)
    return 0;
  auto written = std::fwrite(data, 1, size, file);
  if (std::fclose(file) != 0 || written != size)
    return 0;
  auto got = quarry::host::read_exported_symbols(path);
  if (auto* why = std::get_if<std::string>(&got)) {
    if (why->empty() || why->find('\n') != std::string::npos)
      std::abort();
  } else {
    size_t total = 0;
    for (const auto& name : std::get<std::vector<std::string>>(got)) {
      if (name.empty() || name.find('\0') != std::string::npos)
        std::abort();
      total += name.size();
    }
    if (total > size)
      std::abort(); // every name comes from the file
  }
  return 0;
}
