// This file is part of the Quarry plugin SDK.
// An incremental parser for Server-Sent Events (text/event-stream), as used
// by streaming LLM APIs. Feed it bytes as they arrive, in pieces of any size.

#pragma once

#include <cstring>
#include <functional>
#include <string>
#include <string_view>

namespace quarry::sdk {

/// One dispatched event.
struct sse_event {
  /// The `event:` field; empty means the default type `message`.
  std::string type;
  /// The `data:` lines joined with `\n` (one space after the colon removed).
  std::string data;
  /// The last `id:` field seen, if any.
  std::string id;
};

/// Splits a byte stream into events. Handles `\n`, `\r\n` and `\r` line ends,
/// lines and UTF-8 sequences split across pieces, comments (`:` lines),
/// multi-line data, and a missing blank line at the end of the stream
/// (see @ref finish).
class sse_parser {
public:
  /// Called for each complete event. Returning false stops parsing: `feed`
  /// returns false and ignores the rest of its input.
  using callback = std::function<bool(const sse_event&)>;

  /// Limit on the bytes of one event (guards against a peer that never ends
  /// a line); an event larger than this makes `feed` fail.
  static constexpr size_t default_max_event_size = 16 * 1024 * 1024;

  explicit sse_parser(size_t max_event_size = default_max_event_size)
    : max_event_size_(max_event_size) {
    // nop
  }

  /// Consumes `bytes`, calling `on_event` for every event completed by them.
  /// Returns false if the callback asked to stop or an event grew too large
  /// (see @ref overflowed).
  bool feed(std::string_view bytes, const callback& on_event) {
    const char* p = bytes.data();
    const char* const end = p + bytes.size();
    if (skip_lf_ && p != end) {
      // The piece before ended with \r: a \n here is the second half of it.
      skip_lf_ = false;
      if (*p == '\n')
        ++p;
    }
    // The next \n and \r at or after `p`, each found once with memchr and
    // kept until `p` passes it (null: none in the rest of the piece), so a
    // piece is scanned once for each even if it holds only the other one.
    auto find = [end](const char* from, char c) {
      return from == end ? nullptr : static_cast<const char*>(std::memchr(from, c, end - from));
    };
    const char* lf = find(p, '\n');
    const char* cr = find(p, '\r');
    for (;;) {
      if (lf != nullptr && lf < p)
        lf = find(p, '\n');
      if (cr != nullptr && cr < p)
        cr = find(p, '\r');
      const char* eol = lf == nullptr ? cr : (cr == nullptr || lf < cr ? lf : cr);
      if (eol == nullptr)
        break;
      std::string_view line{p, static_cast<size_t>(eol - p)};
      if (!line_.empty()) {
        // The line began in an earlier piece.
        line_.append(line.data(), line.size());
        line = line_;
      }
      p = eol + 1;
      if (*eol == '\r') {
        if (p == end)
          skip_lf_ = true;
        else if (*p == '\n')
          ++p;
      }
      auto ok = process_line(line, on_event);
      line_.clear();
      if (!ok)
        return false;
    }
    if (p != end)
      line_.append(p, static_cast<size_t>(end - p));
    if (line_.size() + pending_.data.size() > max_event_size_) {
      overflowed_ = true;
      return false;
    }
    return true;
  }

  /// Ends the stream: dispatches a last event that was not followed by a
  /// blank line. Returns false if the callback asked to stop.
  bool finish(const callback& on_event) {
    if (!line_.empty()) {
      auto ok = process_line(line_, on_event);
      line_.clear();
      if (!ok)
        return false;
    }
    if (has_data_) {
      has_data_ = false;
      auto ev = std::move(pending_);
      pending_ = sse_event{};
      return on_event(ev);
    }
    return true;
  }

  /// Returns whether parsing stopped because an event exceeded the limit.
  bool overflowed() const noexcept {
    return overflowed_;
  }

private:
  // Handles one line (without its end). The caller clears `line_`, which
  // `line` may view.
  bool process_line(std::string_view line, const callback& on_event) {
    if (line.empty()) {
      // Blank line: dispatch.
      auto ok = true;
      if (has_data_ || !pending_.type.empty()) {
        auto ev = std::move(pending_);
        pending_ = sse_event{};
        has_data_ = false;
        ok = on_event(ev);
      }
      return ok;
    }
    if (line.front() != ':') {
      auto colon = line.find(':');
      auto field = line.substr(0, colon);
      std::string_view value;
      if (colon != std::string_view::npos) {
        value = line.substr(colon + 1);
        if (!value.empty() && value.front() == ' ')
          value.remove_prefix(1);
      }
      if (field == "data") {
        if (has_data_)
          pending_.data += '\n';
        pending_.data.append(value.data(), value.size());
        has_data_ = true;
      } else if (field == "event") {
        pending_.type.assign(value.data(), value.size());
      } else if (field == "id") {
        pending_.id.assign(value.data(), value.size());
      }
      // `retry:` and unknown fields are ignored.
    }
    if (pending_.data.size() > max_event_size_) {
      overflowed_ = true;
      return false;
    }
    return true;
  }

  size_t max_event_size_;
  std::string line_;
  sse_event pending_;
  bool has_data_ = false;
  bool skip_lf_ = false;
  bool overflowed_ = false;
};

} // namespace quarry::sdk
