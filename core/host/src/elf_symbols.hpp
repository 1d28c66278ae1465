// Reads the names of the symbols a shared library exports, from the file on
// disk, without loading it: what the plugin registry checks before dlopen
// runs any code of a plugin (static constructors included).

#pragma once

#include <string>
#include <variant>
#include <vector>

namespace quarry::host {

/// The names of the symbols a shared library defines and exports (its
/// dynamic symbol table, which is what the dynamic loader resolves; it
/// survives `strip`), or the one-line reason the file cannot be read as a
/// shared library of this machine.
///
/// Every offset and size in the file is checked against the file's size
/// before it is used, and the tables read are bounded (a file is hostile
/// until proven otherwise).
///
/// Boost.DLL's `library_info` (1.74) is not used: it reads only `.symtab`
/// (gone after `strip`), takes the names from whichever string table comes
/// last in the file (`.shstrtab` in GCC's output, so names at small offsets
/// come out wrong) and trusts the sizes and offsets the file declares.
std::variant<std::vector<std::string>, std::string> read_exported_symbols(const std::string& path);

} // namespace quarry::host
