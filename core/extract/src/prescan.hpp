// The pre-scan of HTML before parsing (nesting.cpp), internal to extraction.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace quarry::extract {

/// @ref limit_html_nesting, and with `empty_scripts` also the text of every
/// <script> (but JSON-LD ones) and <style> outside SVG and MathML removed,
/// which extraction never reads. Returns an empty optional when nothing
/// changed.
std::optional<std::string> prescan_html(std::string_view html,
                                        size_t max_depth, bool empty_scripts);

} // namespace quarry::extract
