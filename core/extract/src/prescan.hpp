// The pre-scan of HTML before parsing (nesting.cpp), internal to extraction.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace quarry::extract {

/// @ref limit_html_nesting, and with `for_extraction` also what extraction
/// never reads removed: the text of every <script> (but JSON-LD ones) and
/// <style> outside SVG, MathML and <select>, and the attributes of start
/// tags that are not kept_attribute() (the parser would tokenize them
/// character by character). Returns an empty optional when nothing changed.
std::optional<std::string> prescan_html(std::string_view html, size_t max_depth,
                                        bool for_extraction);

/// Whether extraction reads the attribute (or the parser needs it to build
/// the tree): the attributes that prescan_html keeps. A name that extraction
/// (html*.cpp) reads must be in this list.
bool kept_attribute(std::string_view name);

} // namespace quarry::extract
