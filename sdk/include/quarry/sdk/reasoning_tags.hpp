// This file is part of the Quarry plugin SDK.
// Splits reasoning that a model wrote inside its answer text (between tags
// such as <think> and </think>) from the answer, while the text streams in.

#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace quarry::sdk {

/// The tags around one block of reasoning, e.g. `<think>` and `</think>`.
struct reasoning_tag {
  std::string open;
  std::string close;
};

/// `<think>`/`</think>` (DeepSeek-R1 and its distillations, Qwen3, QwQ,
/// served through a chat template by Ollama, llama.cpp, LM Studio or vLLM
/// without a reasoning parser) and `<thinking>`/`</thinking>`.
inline std::vector<reasoning_tag> default_reasoning_tags() {
  return {{"<think>", "</think>"}, {"<thinking>", "</thinking>"}};
}

/// Routes a leading reasoning block of a streamed answer to the reasoning
/// channel, safe across chunk borders (a tag may arrive one byte at a time).
///
/// Recognised shapes, after optional leading white space:
/// - an opening tag, the reasoning, the closing tag, then the answer;
/// - when the chat template put the opening tag into the prompt (the
///   *opener in prompt* mode, set by the constructor): the reasoning, a
///   closing tag of its own, then the answer. In that mode the text before
///   a closer streams as reasoning; an answer that never closes is moved back
///   to the answer at @ref finish (see @ref output::moved_to_text);
/// - in any mode, an answer that starts with a closing tag (an empty thought
///   whose opener was in the prompt).
/// A tag later in the answer is text (a model may write about tags). White
/// space between the closing tag and the answer is dropped. Tags match ASCII
/// case-insensitively. At most one closing tag's length is held back at a
/// time, and since tags are ASCII no UTF-8 sequence is ever split.
class reasoning_tag_splitter {
public:
  /// What one piece of input (or the end) produced.
  struct output {
    /// Answer text, in order.
    std::string text;
    /// Reasoning text, in order.
    std::string reasoning;
    /// Set by @ref finish in the opener-in-prompt mode when no closing tag
    /// came: the reasoning streamed so far (`reasoning_total()` before the
    /// call) was the answer after all, and is now part of `text` and of
    /// @ref text_total.
    bool moved_to_text = false;
    /// Set by @ref finish when the answer, streamed as text, turned out to
    /// hold an orphan closing tag (the template put the opener in the
    /// prompt, and this splitter was not told): @ref text_total and
    /// @ref reasoning_total now hold the split, which the caller's result
    /// should take; what streamed cannot be taken back, and the caller
    /// should start the next answer in the opener-in-prompt mode.
    bool split_late = false;
  };

  /// Splits with `tags` (none: nothing is split). `opener_in_prompt`: text
  /// before the first closing tag is reasoning even without an opener.
  explicit reasoning_tag_splitter(std::vector<reasoning_tag> tags = default_reasoning_tags(),
                                  bool opener_in_prompt = false)
    : tags_(std::move(tags)), opener_in_prompt_(opener_in_prompt) {
    if (tags_.empty())
      phase_ = phase::answer;
  }

  /// Consumes a piece of the answer text.
  output feed(std::string_view piece) {
    output out;
    held_.append(piece.data(), piece.size());
    run(out, false);
    account(out);
    return out;
  }

  /// Ends the answer: releases what was held back.
  output finish() {
    output out;
    if (finished_)
      return out;
    run(out, true);
    finished_ = true;
    if (phase_ == phase::orphan && !closer_seen_) {
      // Opener in prompt, but no closer came: all of it was the answer.
      out.moved_to_text = true;
      out.text = reasoning_total_ + out.reasoning + out.text;
      out.reasoning.clear();
      reasoning_total_.clear();
    }
    account(out);
    if (phase_ == phase::answer && !found_)
      split_orphan_late(out);
    return out;
  }

  /// Whether a reasoning block was recognised (opened, or closed by an
  /// orphan closing tag).
  bool found() const noexcept {
    return found_;
  }

  /// Whether a closing tag without an opener ended the reasoning: the chat
  /// template puts the opener into the prompt.
  bool orphan_closer_seen() const noexcept {
    return orphan_closer_;
  }

  /// All answer text so far.
  const std::string& text_total() const noexcept {
    return text_total_;
  }

  /// All reasoning text so far.
  const std::string& reasoning_total() const noexcept {
    return reasoning_total_;
  }

private:
  enum class phase : uint8_t {
    /// Before the first non-blank byte: an opener may come.
    start,
    /// Inside a block opened by `tags_[tag_]`.
    inside,
    /// Opener in prompt: reasoning until any closing tag.
    orphan,
    /// After the closing tag: white space before the answer is dropped.
    after_close,
    /// The answer.
    answer,
  };

  static bool is_blank(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
  }

  static char lower(char c) noexcept {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }

  /// Whether `text` starts with `tag` (ASCII case-insensitively).
  static bool starts_with(std::string_view text, std::string_view tag) noexcept {
    if (text.size() < tag.size())
      return false;
    for (size_t i = 0; i < tag.size(); ++i)
      if (lower(text[i]) != lower(tag[i]))
        return false;
    return true;
  }

  /// Whether `text` (shorter than `tag`) could still become `tag`.
  static bool could_become(std::string_view text, std::string_view tag) noexcept {
    return text.size() < tag.size() && starts_with(tag, text);
  }

  /// Finds `tag` in `text`; npos if absent.
  static size_t find_tag(std::string_view text, std::string_view tag) noexcept {
    if (tag.empty() || text.size() < tag.size())
      return std::string_view::npos;
    for (size_t i = 0; i + tag.size() <= text.size(); ++i)
      if (lower(text[i]) == lower(tag[0]) && starts_with(text.substr(i), tag))
        return i;
    return std::string_view::npos;
  }

  /// The length of the longest end of `text` that could begin `tag`.
  static size_t partial_tail(std::string_view text, std::string_view tag) noexcept {
    auto n = std::min(text.size(), tag.size() - 1);
    for (; n > 0; --n)
      if (starts_with(tag, text.substr(text.size() - n)))
        return n;
    return 0;
  }

  /// An answer that streamed as text but closes a thought it never opened:
  /// the text before the first closing tag (with no opening tag before it)
  /// is reasoning after all.
  void split_orphan_late(output& out) {
    size_t best = std::string::npos;
    size_t best_len = 0;
    for (const auto& tag : tags_) {
      auto pos = find_tag(text_total_, tag.close);
      if (pos < best
          && find_tag(std::string_view{text_total_}.substr(0, pos), tag.open)
               == std::string_view::npos) {
        best = pos;
        best_len = tag.close.size();
      }
    }
    if (best == std::string::npos)
      return;
    size_t start = best + best_len;
    while (start < text_total_.size() && is_blank(text_total_[start]))
      ++start;
    size_t lead = 0;
    while (lead < best && is_blank(text_total_[lead]))
      ++lead;
    reasoning_total_ += text_total_.substr(lead, best - lead);
    text_total_.erase(0, start);
    found_ = orphan_closer_ = closer_seen_ = true;
    out.split_late = true;
  }

  void account(const output& out) {
    text_total_ += out.text;
    reasoning_total_ += out.reasoning;
  }

  /// Reasoning up to the first of the closing tags in `closers` (indices of
  /// `tags_`); true when one was found and consumed.
  bool consume_until_close(output& out, bool at_end, size_t only) {
    size_t best = std::string::npos;
    size_t best_len = 0;
    for (size_t i = 0; i < tags_.size(); ++i) {
      if (only != npos_tag && i != only)
        continue;
      auto pos = find_tag(held_, tags_[i].close);
      if (pos != std::string::npos && pos < best) {
        best = pos;
        best_len = tags_[i].close.size();
      }
    }
    if (best != std::string::npos) {
      out.reasoning.append(held_, 0, best);
      held_.erase(0, best + best_len);
      closer_seen_ = true;
      return true;
    }
    size_t keep = 0;
    if (!at_end)
      for (size_t i = 0; i < tags_.size(); ++i)
        if (only == npos_tag || i == only)
          keep = std::max(keep, partial_tail(held_, tags_[i].close));
    out.reasoning.append(held_, 0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return false;
  }

  void run(output& out, bool at_end) {
    for (;;) {
      switch (phase_) {
        case phase::start: {
          size_t skip = 0;
          while (skip < held_.size() && is_blank(held_[skip]))
            ++skip;
          std::string_view rest{held_};
          rest.remove_prefix(skip);
          if (rest.empty()) {
            if (at_end) {
              out.text += held_;
              held_.clear();
            }
            return;
          }
          bool pending = false;
          for (size_t i = 0; i < tags_.size(); ++i) {
            if (starts_with(rest, tags_[i].open)) {
              held_.erase(0, skip + tags_[i].open.size());
              tag_ = i;
              found_ = true;
              phase_ = phase::inside;
              break;
            }
            if (starts_with(rest, tags_[i].close)) {
              // An empty thought whose opener was in the prompt.
              held_.erase(0, skip + tags_[i].close.size());
              found_ = orphan_closer_ = closer_seen_ = true;
              phase_ = phase::after_close;
              break;
            }
            if (could_become(rest, tags_[i].open) || could_become(rest, tags_[i].close))
              pending = true;
          }
          if (phase_ != phase::start)
            continue;
          if (pending && !at_end)
            return;
          if (opener_in_prompt_) {
            held_.erase(0, skip);
            phase_ = phase::orphan;
          } else {
            phase_ = phase::answer;
          }
          continue;
        }
        case phase::inside:
          if (!consume_until_close(out, at_end, tag_))
            return;
          phase_ = phase::after_close;
          continue;
        case phase::orphan:
          if (!consume_until_close(out, at_end, npos_tag))
            return;
          found_ = orphan_closer_ = true;
          phase_ = phase::after_close;
          continue;
        case phase::after_close: {
          size_t skip = 0;
          while (skip < held_.size() && is_blank(held_[skip]))
            ++skip;
          held_.erase(0, skip);
          if (held_.empty())
            return;
          phase_ = phase::answer;
          continue;
        }
        case phase::answer:
          out.text += held_;
          held_.clear();
          return;
      }
    }
  }

  static constexpr size_t npos_tag = static_cast<size_t>(-1);

  std::vector<reasoning_tag> tags_;
  bool opener_in_prompt_ = false;
  phase phase_ = phase::start;
  size_t tag_ = 0;
  std::string held_;
  std::string text_total_;
  std::string reasoning_total_;
  bool found_ = false;
  bool orphan_closer_ = false;
  bool closer_seen_ = false;
  bool finished_ = false;
};

} // namespace quarry::sdk
