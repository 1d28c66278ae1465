// Progress output of `quarry research`.

#include "research_view.hpp"

#include <algorithm>

namespace quarry::app {

namespace {

std::string clip(std::string text, size_t max) {
  for (auto& c : text)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  if (text.size() <= max)
    return text;
  // Cut at a UTF-8 boundary.
  auto cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80)
    --cut;
  return text.substr(0, cut) + "...";
}

std::string elapsed_text(std::chrono::steady_clock::duration d) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(s / 60),
                static_cast<long long>(s % 60));
  return buf;
}

std::string tokens_text(int64_t n) {
  if (n < 1000)
    return std::to_string(n);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fk", static_cast<double>(n) / 1000.0);
  return buf;
}

} // namespace

research_view::research_view(std::FILE* out, bool live)
  : out_(out), live_(live), started_(std::chrono::steady_clock::now()) {
  // nop
}

void research_view::line(const std::string& text) {
  if (live_)
    return;
  std::fprintf(out_, "[%s] %s\n", elapsed_text(std::chrono::steady_clock::now() - started_).c_str(),
               text.c_str());
  std::fflush(out_);
}

void research_view::on_packet(const core::packet& p) {
  auto type = p.type();
  const auto& o = p.obj;
  auto key = std::make_pair(p.where.turn_index, p.where.tab_index);
  auto str = [&o](const char* field) {
    auto i = o.find(field);
    return i != o.end() && i->is_string() ? i->get<std::string>() : std::string{};
  };
  auto docs = [&](const char* field) {
    if (auto i = o.find(field); i != o.end() && i->is_array())
      for (const auto& d : *i)
        if (d.is_object() && d.contains("document_id") && d["document_id"].is_string())
          sources_.insert(d["document_id"].get<std::string>());
  };
  if (type == "deep_research_plan_delta") {
    plan_ += str("content");
  } else if (type == "section_end" && !plan_.empty() && !plan_done_) {
    plan_done_ = true;
    phase_ = "researching";
    line("plan:\n" + plan_);
  } else if (type == "research_agent_start") {
    auto& l = lanes_[key];
    l.task = str("research_task");
    l.action = "starting";
    line("agent " + std::to_string(p.where.tab_index + 1) + ": " + clip(l.task, 100));
  } else if (type == "search_tool_queries_delta") {
    std::string qs;
    if (auto i = o.find("queries"); i != o.end() && i->is_array())
      for (const auto& q : *i)
        if (q.is_string())
          qs += (qs.empty() ? "\"" : ", \"") + q.get<std::string>() + "\"";
    lanes_[key].action = "searching " + qs;
    line("agent " + std::to_string(p.where.tab_index + 1) + ": searching " + clip(qs, 100));
  } else if (type == "open_url_urls") {
    size_t n = o.contains("urls") && o["urls"].is_array() ? o["urls"].size() : 0;
    lanes_[key].action = "reading " + std::to_string(n) + (n == 1 ? " page" : " pages");
    line("agent " + std::to_string(p.where.tab_index + 1) + ": " + lanes_[key].action);
  } else if (type == "search_tool_documents_delta" || type == "open_url_documents") {
    docs("documents");
  } else if (type == "reasoning_start" && p.where.sub_turn_index) {
    lanes_[key].action = "thinking";
  } else if (type == "intermediate_report_start") {
    lanes_[key].action = "writing its report";
    line("agent " + std::to_string(p.where.tab_index + 1) + ": writing its report");
  } else if (type == "intermediate_report_cited_docs") {
    lanes_[key].action = "done";
    lanes_[key].done = true;
  } else if (type == "error") {
    if (lanes_.count(key) > 0)
      lanes_[key].action = "failed: " + clip(str("message"), 60);
    line("error: " + str("message"));
  } else if (type == "notice") {
    line(str("text"));
  } else if (type == "message_start") {
    phase_ = "writing the report";
    line("writing the report");
  } else if (type == "usage") {
    if (auto i = o.find("input_tokens"); i != o.end() && i->is_number())
      tokens_ += i->get<int64_t>();
    if (auto i = o.find("output_tokens"); i != o.end() && i->is_number())
      tokens_ += i->get<int64_t>();
  }
  redraw(false);
}

std::vector<std::string> research_view::status_lines() const {
  std::vector<std::string> out;
  if (!plan_.empty()) {
    size_t steps = static_cast<size_t>(std::count(plan_.begin(), plan_.end(), '\n')) + 1;
    out.push_back("Plan: " + std::to_string(steps) + (steps == 1 ? " step" : " steps"));
  }
  for (const auto& [k, l] : lanes_) {
    if (l.done)
      continue;
    out.push_back("  [" + std::to_string(k.second + 1) + "] " + clip(l.task, 50) + " - "
                  + clip(l.action, 60));
  }
  out.push_back(phase_ + " | sources: " + std::to_string(sources_.size()) + " | "
                + elapsed_text(std::chrono::steady_clock::now() - started_)
                + (tokens_ > 0 ? " | tokens: " + tokens_text(tokens_) : ""));
  return out;
}

void research_view::redraw(bool force) {
  if (!live_)
    return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds{100})
    return;
  last_draw_ = now;
  // Move up over the previous block and clear it.
  for (size_t i = 0; i < drawn_; ++i)
    std::fputs("\x1b[1A\x1b[2K", out_);
  auto lines = status_lines();
  for (const auto& l : lines)
    std::fprintf(out_, "%s\n", clip(l, 150).c_str());
  drawn_ = lines.size();
  std::fflush(out_);
}

void research_view::finish() {
  if (!live_)
    return;
  for (size_t i = 0; i < drawn_; ++i)
    std::fputs("\x1b[1A\x1b[2K", out_);
  drawn_ = 0;
  std::fflush(out_);
}

} // namespace quarry::app
