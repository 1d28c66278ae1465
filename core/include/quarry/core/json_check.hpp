// Whether text is JSON, without parsing it into a tree.

#pragma once

#include <cstddef>
#include <string_view>

namespace quarry::core {

/// Whether `text` is one JSON value as nlohmann's parser reads it (RFC 8259:
/// strict numbers and literals, escapes with paired surrogates, no control
/// characters in strings, valid UTF-8, only whitespace around the value (or
/// after it a NUL byte, which the parser takes as the end of its input), an
/// optional UTF-8 byte order mark first), with containers nested at most
/// `max_depth` deep. Reads each byte once and allocates only a stack of the
/// open containers (`nlohmann::json::accept` copies every character of every
/// string into a buffer): for text that is only checked, or rewritten in
/// place (renumber_documents).
bool is_json(std::string_view text, size_t max_depth);

} // namespace quarry::core
