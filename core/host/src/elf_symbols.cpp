// A bounded reader of an ELF file's dynamic symbol names.

#include "elf_symbols.hpp"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <fstream>

namespace quarry::host {

namespace {

// Largest dynamic symbol table and string table read (a plugin exports a
// few hundred symbols; a libstdc++-sized library has about 7,000).
constexpr uint64_t max_table_bytes = 64 * 1024 * 1024;

#if defined(__x86_64__)
constexpr uint16_t native_machine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t native_machine = EM_AARCH64;
#elif defined(__riscv)
constexpr uint16_t native_machine = EM_RISCV;
#elif defined(__powerpc64__)
constexpr uint16_t native_machine = EM_PPC64;
#elif defined(__s390x__)
constexpr uint16_t native_machine = EM_S390;
#else
#  error "unknown machine: add its ELF e_machine value"
#endif

static_assert(sizeof(void*) == 8, "the reader expects 64-bit ELF files");

constexpr unsigned char native_data = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB
                                                                                : ELFDATA2MSB;

class reader {
public:
  explicit reader(const std::string& path) : in_(path, std::ios::binary | std::ios::ate) {
    if (in_)
      size_ = static_cast<uint64_t>(in_.tellg());
  }

  bool is_open() const {
    return static_cast<bool>(in_);
  }

  uint64_t size() const {
    return size_;
  }

  // Whether [offset, offset + len) lies inside the file.
  bool inside(uint64_t offset, uint64_t len) const {
    return offset <= size_ && len <= size_ - offset;
  }

  // Reads exactly `len` bytes at `offset` (checked with inside() first).
  bool read(uint64_t offset, void* out, uint64_t len) {
    if (!inside(offset, len))
      return false;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(len));
    return static_cast<uint64_t>(in_.gcount()) == len;
  }

private:
  std::ifstream in_;
  uint64_t size_ = 0;
};

} // namespace

std::variant<std::vector<std::string>, std::string> read_exported_symbols(const std::string& path) {
  reader in{path};
  if (!in.is_open())
    return std::string{"cannot open the file"};
  Elf64_Ehdr eh;
  unsigned char ident[EI_NIDENT] = {};
  if (!in.read(0, ident, sizeof(ident)) || std::memcmp(ident, ELFMAG, SELFMAG) != 0)
    return std::string{"not a shared object (no ELF header)"};
  if (ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != native_data)
    return std::string{"built for another machine ("}
           + (ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "not 64-bit")
           + (ident[EI_DATA] != native_data ? ", other byte order" : "") + " ELF file)";
  if (!in.read(0, &eh, sizeof(eh)))
    return std::string{"truncated ELF header"};
  if (eh.e_machine != native_machine)
    return "built for another machine (ELF machine " + std::to_string(eh.e_machine)
           + ", this host is " + std::to_string(native_machine) + ")";
  if (eh.e_type != ET_DYN)
    return std::string{"not a shared library (ELF type "} + std::to_string(eh.e_type) + ")";
  if (eh.e_shnum == 0 || eh.e_shentsize != sizeof(Elf64_Shdr))
    return std::string{"malformed ELF file (no usable section table)"};
  auto table_bytes = static_cast<uint64_t>(eh.e_shnum) * sizeof(Elf64_Shdr);
  if (!in.inside(eh.e_shoff, table_bytes))
    return std::string{"malformed ELF file (section table beyond the end of "
                       "the file)"};
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!in.read(eh.e_shoff, sections.data(), table_bytes))
    return std::string{"malformed ELF file (cannot read the section table)"};
  const Elf64_Shdr* dynsym = nullptr;
  for (const auto& sh : sections)
    if (sh.sh_type == SHT_DYNSYM) {
      if (dynsym != nullptr)
        return std::string{"malformed ELF file (two dynamic symbol tables)"};
      dynsym = &sh;
    }
  if (dynsym == nullptr)
    return std::vector<std::string>{}; // exports nothing
  if (dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_link == 0
      || dynsym->sh_link >= sections.size())
    return std::string{"malformed ELF file (bad dynamic symbol table)"};
  const auto& strtab = sections[dynsym->sh_link];
  if (strtab.sh_type != SHT_STRTAB)
    return std::string{"malformed ELF file (dynamic symbol names are not a "
                       "string table)"};
  if (dynsym->sh_size > max_table_bytes || strtab.sh_size > max_table_bytes)
    return std::string{"dynamic symbol table larger than 64 MiB"};
  if (!in.inside(dynsym->sh_offset, dynsym->sh_size)
      || !in.inside(strtab.sh_offset, strtab.sh_size))
    return std::string{"malformed ELF file (symbol table beyond the end of "
                       "the file)"};
  std::vector<Elf64_Sym> syms(dynsym->sh_size / sizeof(Elf64_Sym));
  std::string names(strtab.sh_size, '\0');
  if (!in.read(dynsym->sh_offset, syms.data(), syms.size() * sizeof(Elf64_Sym))
      || !in.read(strtab.sh_offset, names.data(), names.size()))
    return std::string{"malformed ELF file (cannot read the symbol table)"};
  std::vector<std::string> out;
  for (const auto& sym : syms) {
    auto bind = ELF64_ST_BIND(sym.st_info);
    auto visibility = ELF64_ST_VISIBILITY(sym.st_other);
    // Defined, global or weak, and visible from outside.
    if (sym.st_shndx == SHN_UNDEF
        || (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
        || (visibility != STV_DEFAULT && visibility != STV_PROTECTED))
      continue;
    if (sym.st_name >= names.size())
      return std::string{"malformed ELF file (a symbol name lies outside its "
                         "string table)"};
    auto end = names.find('\0', sym.st_name);
    if (end == std::string::npos)
      return std::string{"malformed ELF file (unterminated symbol name)"};
    if (end > sym.st_name)
      out.emplace_back(names, sym.st_name, end - sym.st_name);
  }
  return out;
}

} // namespace quarry::host
