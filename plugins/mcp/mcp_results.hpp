// What an MCP tool's answer (a CallToolResult) becomes for a research
// agent: the text the model reads and, by the tool's kind, the documents it
// can cite, cut to the instance's caps.

#pragma once

#include "quarry/sdk/tool.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace quarry::plugins::mcp {

/// How to read one tool's answers.
struct result_options {
  /// The name the model calls the tool by (in messages).
  std::string tool;
  sdk::tool_kind kind = sdk::tool_kind::other;
  /// Bytes of text given to the model at most.
  size_t max_output_bytes = 128 * 1024;
  /// Search results kept at most.
  size_t max_results = 10;
};

/// Converts the `result` of a `tools/call` (MCP specification 2025-11-25,
/// server/tools, "Tool Result": `content` blocks, `structuredContent`,
/// `isError`) made with `arguments`:
/// - `isError`: a failure (errc::bad_request) whose text, the server's
///   words, the model reads;
/// - text blocks are the model's text; images, audio and binary resources
///   are named, not passed; resource links are listed; without any text,
///   `structuredContent` serialised is the text;
/// - a search (`web_search`, `internal_search`) reads its results from
///   `structuredContent` (an array under `results`, `documents`, `items` or
///   `hits`), else from a text block holding such JSON, else from resource
///   links and embedded resources; each needs a `url` (or `link`, `uri`,
///   `href`, `path`), with `title` (or `name`), `snippet` (or `content`,
///   `text`, `description`, `summary`) and `published` (or
///   `publishedDate`, `date`): the model then reads them numbered as the
///   built-in searches show theirs and they become documents (kind `web`
///   for http(s) addresses, `internal` otherwise);
/// - a page reader's documents are its embedded text resources, else its
///   text as one document at the address it was given (`url`, `uri`,
///   `path`, `file`, or the first of `urls`, `uris`, `paths`);
/// - what holds no usable result is passed as text, without documents.
/// Text is repaired to valid UTF-8 and cut at `max_output_bytes` with a
/// note saying so. A `result` that is not an object is a failure
/// (errc::invalid_response).
sdk::tool_result convert_result(const nlohmann::json& result, const nlohmann::json& arguments,
                                const result_options& options);

/// Cuts `text` to at most `max_bytes` (at a UTF-8 boundary) and, when it
/// cut, appends a note with the original size.
std::string cut_output(std::string text, size_t max_bytes);

} // namespace quarry::plugins::mcp
