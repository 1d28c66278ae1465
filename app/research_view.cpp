// Progress output of `quarry research`.

#include "research_view.hpp"

#include "session_usage.hpp"

#include "quarry/sdk/strings.hpp"

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include <cctype>

#include <sys/ioctl.h>
#include <unistd.h>

namespace quarry::app {

namespace {

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

// Plan lines as steps: blank lines dropped, list markers kept.
std::vector<std::string> plan_steps(const std::string& plan) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= plan.size()) {
    auto nl = plan.find('\n', pos);
    auto l = plan.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    auto a = l.find_first_not_of(" \t\r");
    if (a != std::string::npos)
      out.push_back(l.substr(a));
    if (nl == std::string::npos)
      break;
    pos = nl + 1;
  }
  return out;
}

constexpr size_t max_plan_lines = 8;

} // namespace

std::string research_view::fit(std::string text, size_t width) {
  // Escape sequences and controls would move the cursor or retitle the
  // window: never print them.
  text = sdk::strip_terminal_controls(text);
  for (auto& c : text)
    if (c == '\n' || c == '\t')
      c = ' ';
  if (width == 0)
    return {};
  size_t columns = 0;
  size_t cut = std::string::npos; // byte offset where "..." would go
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) == 0x80)
      continue; // continuation byte
    if (columns == (width >= 3 ? width - 3 : 0) && cut == std::string::npos)
      cut = i;
    if (columns == width)
      return width >= 3 ? text.substr(0, cut) + "..." : text.substr(0, i);
    ++columns;
  }
  return text;
}

research_view::research_view(std::FILE* out, bool live, int width)
  : out_(out), live_(live), fixed_width_(width), started_(std::chrono::steady_clock::now()) {
  // nop
}

research_view::~research_view() {
  finish();
}

size_t research_view::width_locked() const {
  if (fixed_width_ > 0)
    return static_cast<size_t>(fixed_width_);
  winsize ws{};
  if (::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 80;
}

void research_view::line(const std::string& text) {
  if (live_)
    return;
  // Cleaned even when `out_` is no terminal: these lines are for people
  // (a log file is read in a terminal too), never data to keep byte for byte.
  std::fprintf(out_, "[%s] %s\n", elapsed_text(std::chrono::steady_clock::now() - started_).c_str(),
               sdk::strip_terminal_controls(text).c_str());
  std::fflush(out_);
}

void research_view::on_packet(const core::packet& p) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto type = p.type();
  const auto& o = p.obj;
  auto key = std::make_pair(p.where.turn_index, p.where.tab_index);
  auto agent = "agent " + std::to_string(p.where.tab_index + 1);
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
    line(agent + ": " + fit(l.task, 100));
  } else if (type == "search_tool_queries_delta") {
    std::string qs;
    if (auto i = o.find("queries"); i != o.end() && i->is_array())
      for (const auto& q : *i)
        if (q.is_string())
          qs += (qs.empty() ? "\"" : ", \"") + q.get<std::string>() + "\"";
    lanes_[key].action = "searching " + qs;
    line(agent + ": searching " + fit(qs, 100));
  } else if (type == "open_url_urls") {
    size_t n = o.contains("urls") && o["urls"].is_array() ? o["urls"].size() : 0;
    lanes_[key].action = "reading " + std::to_string(n) + (n == 1 ? " page" : " pages");
    line(agent + ": " + lanes_[key].action);
  } else if (type == "search_tool_documents_delta" || type == "open_url_documents") {
    docs("documents");
  } else if (type == "reasoning_start" && p.where.sub_turn_index) {
    lanes_[key].action = "thinking";
  } else if (type == "intermediate_report_start") {
    lanes_[key].action = "writing its report";
    line(agent + ": writing its report");
  } else if (type == "intermediate_report_cited_docs") {
    lanes_[key].action = "done";
    lanes_[key].done = true;
  } else if (type == "error") {
    if (lanes_.count(key) > 0)
      lanes_[key].action = "failed: " + fit(str("message"), 60);
    line("error: " + str("message"));
  } else if (type == "notice") {
    line(str("text"));
  } else if (type == "message_start") {
    phase_ = "writing the report";
    line("writing the report");
  } else if (type == "reflective_plan") {
    const auto& pl = o.contains("plan") && o["plan"].is_object() ? o["plan"] : o;
    std::vector<check_item> items;
    if (auto i = pl.find("steps"); i != pl.end() && i->is_array())
      for (const auto& s : *i) {
        if (!s.is_object())
          continue;
        check_item c;
        c.status = s.value("status", "");
        c.id = s.value("id", "");
        c.title = s.value("title", "");
        items.push_back(std::move(c));
      }
    auto iteration = pl.value("iteration", 0);
    auto fresh = iteration != plan_iteration_;
    checklist_ = std::move(items);
    plan_iteration_ = iteration;
    if (fresh) {
      phase_ = "researching";
      line((iteration > 1 ? "plan " + std::to_string(iteration) + ":\n" : "plan:\n")
           + plan_locked());
    }
  } else if (type == "question_classified") {
    line("question: " + str("complexity") + ", depth " + str("depth") + ", mode " + str("mode"));
  } else if (type == "plan_step_start") {
    phase_ = "step " + str("step_id") + ": " + fit(str("title"), 60);
    line(phase_);
  } else if (type == "plan_step_end") {
    line("step " + str("step_id") + " " + str("status")
         + (o.contains("failure") ? ": " + str("failure") : std::string{}));
  } else if (type == "reflection") {
    auto taken = str("taken");
    for (auto& c : taken)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    line("reflection after " + str("step_id") + ": " + taken
         + (o.value("refused", false) ? " (" + str("why") + ")" : std::string{}));
  } else if (type == "claim_verified") {
    ++claims_checked_;
    phase_ = "verifying (" + std::to_string(claims_checked_) + " claims)";
  } else if (type == "verification_summary") {
    auto num = [&o](const char* f) {
      return o.contains(f) && o[f].is_number() ? o[f].get<int64_t>() : 0;
    };
    line("verified: " + std::to_string(num("supported")) + " of " + std::to_string(num("claims"))
         + " claims supported, " + std::to_string(num("unsupported")) + " unsupported, "
         + std::to_string(num("unverified")) + " unverified");
  } else if (type == "usage") {
    // The offline provider's token counts are estimates, not tokens.
    if (o.value("offline", false)) {
      ++totals_.offline_calls;
    } else {
      ++totals_.model_calls;
      if (!o.value("cost_known", true))
        ++totals_.unpriced_calls;
      if (auto i = o.find("input_tokens"); i != o.end() && i->is_number())
        totals_.tokens += i->get<int64_t>();
      if (auto i = o.find("output_tokens"); i != o.end() && i->is_number())
        totals_.tokens += i->get<int64_t>();
      if (auto i = o.find("cost_usd"); i != o.end() && i->is_number())
        totals_.cost_usd += i->get<double>();
    }
  }
  redraw_locked(false);
}

void research_view::print_above(const std::string& text) {
  std::lock_guard<std::mutex> guard{mtx_};
  clear_locked();
  auto clean = sdk::strip_terminal_controls(text);
  std::fputs(clean.c_str(), out_);
  if (!clean.empty() && clean.back() != '\n')
    std::fputc('\n', out_);
  redraw_locked(true);
}

void research_view::print_above(const std::function<void()>& write) {
  std::lock_guard<std::mutex> guard{mtx_};
  clear_locked();
  std::fflush(out_);
  write();
  redraw_locked(true);
}

std::vector<std::string> research_view::status_lines(size_t width) const {
  std::vector<std::string> out;
  auto add = [&](const std::string& l) { out.push_back(fit(l, width)); };
  if (!checklist_.empty()) {
    add("Plan (" + std::to_string(checklist_.size())
        + (checklist_.size() == 1 ? " step):" : " steps):"));
    for (size_t i = 0; i < checklist_.size() && i < max_plan_lines; ++i)
      add("  " + check_line(checklist_[i]));
    if (checklist_.size() > max_plan_lines)
      add("  ... and " + std::to_string(checklist_.size() - max_plan_lines) + " more");
  } else if (!plan_.empty()) {
    auto steps = plan_steps(plan_);
    add("Plan (" + std::to_string(steps.size()) + (steps.size() == 1 ? " step):" : " steps):"));
    for (size_t i = 0; i < steps.size() && i < max_plan_lines; ++i)
      add("  " + steps[i]);
    if (steps.size() > max_plan_lines)
      add("  ... and " + std::to_string(steps.size() - max_plan_lines) + " more");
  }
  for (const auto& [k, l] : lanes_) {
    if (l.done)
      continue;
    add("  [agent " + std::to_string(k.second + 1) + "] " + fit(l.task, 50) + " - " + l.action);
  }
  add(phase_ + " | sources: " + std::to_string(sources_.size()) + " | "
      + elapsed_text(std::chrono::steady_clock::now() - started_)
      + (totals_.tokens > 0 ? " | tokens: " + tokens_text(totals_.tokens) : ""));
  return out;
}

void research_view::clear_locked() {
  if (!live_ || drawn_ == 0)
    return;
  // Lines were drawn no wider than the terminal was; after a shrink they
  // may wrap, so clear everything from the block's first line down.
  std::fprintf(out_, "\r\x1b[%zuA\x1b[J", drawn_);
  drawn_ = 0;
}

void research_view::redraw_locked(bool force) {
  if (!live_ || finished_)
    return;
  auto now = std::chrono::steady_clock::now();
  auto width = width_locked();
  if (!force && width == drawn_width_ && now - last_draw_ < std::chrono::milliseconds{100})
    return;
  last_draw_ = now;
  if (width < drawn_width_ && drawn_ > 0) {
    // Narrower: old lines wrapped into more rows; clear the whole screen
    // below the first row we can be sure of.
    std::fputs("\x1b[2J\x1b[H", out_);
    drawn_ = 0;
  }
  clear_locked();
  // One column spare: writing the last column makes some terminals wrap.
  auto lines = status_lines(width > 1 ? width - 1 : 1);
  for (const auto& l : lines)
    std::fprintf(out_, "%s\n", l.c_str());
  drawn_ = lines.size();
  drawn_width_ = width;
  std::fflush(out_);
}

void research_view::start_clock() {
  if (!live_)
    return;
  std::lock_guard<std::mutex> guard{mtx_};
  if (clock_.joinable() || finished_)
    return;
  clock_ = std::thread{[this] {
    std::unique_lock<std::mutex> lock{mtx_};
    while (!stop_clock_) {
      tick_cv_.wait_for(lock, std::chrono::milliseconds{500});
      if (!stop_clock_)
        redraw_locked(true);
    }
  }};
}

void research_view::finish() {
  std::thread clock;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_clock_ = true;
    clock.swap(clock_);
    clear_locked();
    finished_ = true;
    std::fflush(out_);
  }
  tick_cv_.notify_all();
  if (clock.joinable())
    clock.join();
}

size_t research_view::sources() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return sources_.size();
}

research_totals research_view::totals() const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto out = totals_;
  out.sources = sources_.size();
  return out;
}

std::string research_view::check_line(const check_item& c) {
  auto mark = c.status == "completed"     ? "[x]"
              : c.status == "in_progress" ? "[>]"
              : c.status == "skipped"     ? "[-]"
                                          : "[ ]";
  return std::string{mark} + " " + c.id + " " + c.title;
}

std::string research_view::plan_locked() const {
  if (checklist_.empty())
    return plan_;
  std::string out;
  for (const auto& c : checklist_)
    out += (out.empty() ? "" : "\n") + check_line(c);
  return out;
}

std::string research_view::plan() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return plan_locked();
}

std::string summary_line(std::chrono::steady_clock::duration elapsed, const research_totals& totals,
                         const std::vector<std::string>& files) {
  auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() / 1000.0;
  char head[64];
  std::snprintf(head, sizeof(head), "%.1f s", secs);
  auto calls = [](size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? " call" : " calls");
  };
  std::string out = std::string{"quarry: done in "} + head + ", ";
  if (totals.model_calls == 0 && totals.offline_calls > 0) {
    out += "no model (" + calls(totals.offline_calls, "offline") + ")";
  } else {
    out += calls(totals.model_calls, "model") + ", " + tokens_text(totals.tokens) + " tokens";
    session_usage used;
    used.calls = static_cast<int64_t>(totals.model_calls + totals.offline_calls);
    used.offline_calls = static_cast<int64_t>(totals.offline_calls);
    used.unpriced_calls = static_cast<int64_t>(totals.unpriced_calls);
    used.cost = totals.cost_usd;
    if (auto cost = cost_text(used); !cost.empty())
      out += ", " + cost;
    if (totals.offline_calls > 0)
      out += ", " + calls(totals.offline_calls, "offline");
  }
  out += ", " + std::to_string(totals.sources) + (totals.sources == 1 ? " source" : " sources");
  if (!files.empty()) {
    out += "; wrote ";
    for (size_t i = 0; i < files.size(); ++i)
      out += (i == 0 ? "" : ", ") + files[i];
  }
  return out;
}

// -- log_forwarder ------------------------------------------------------------

namespace {

/// Hands every log line to the logger's own sinks, between clearing and
/// redrawing the live view.
class view_sink final : public spdlog::sinks::sink {
public:
  explicit view_sink(std::vector<spdlog::sink_ptr> inner) : inner_(std::move(inner)) {
    // nop
  }

  void log(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::mutex> guard{mtx_};
    // A log line may quote a server (an error body, a page's title): on the
    // terminal the view is drawn on it comes cleaned of escape sequences.
    auto payload = sdk::strip_terminal_controls({msg.payload.data(), msg.payload.size()});
    auto clean = msg;
    clean.payload = {payload.data(), payload.size()};
    auto write = [&] {
      for (auto& s : inner_)
        if (s->should_log(msg.level)) {
          s->log(clean);
          s->flush();
        }
    };
    if (view_ != nullptr)
      view_->print_above(write);
    else
      write();
  }

  void flush() override {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& s : inner_)
      s->flush();
  }

  void set_pattern(const std::string& pattern) override {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& s : inner_)
      s->set_pattern(pattern);
  }

  void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& s : inner_)
      s->set_formatter(f->clone());
  }

  void set_view(research_view* view) {
    std::lock_guard<std::mutex> guard{mtx_};
    view_ = view;
  }

private:
  std::mutex mtx_;
  std::vector<spdlog::sink_ptr> inner_;
  research_view* view_ = nullptr;
};

} // namespace

struct log_forwarder::impl {
  std::shared_ptr<spdlog::logger> logger;
  std::shared_ptr<view_sink> sink;
};

log_forwarder::log_forwarder(research_view* view) : impl_(std::make_shared<impl>()) {
  if (view == nullptr)
    return;
  impl_->logger = spdlog::default_logger();
  if (!impl_->logger)
    return;
  auto& sinks = impl_->logger->sinks();
  impl_->sink = std::make_shared<view_sink>(sinks);
  impl_->sink->set_view(view);
  sinks.assign(1, impl_->sink);
}

log_forwarder::~log_forwarder() {
  // The sink stays in place, passing lines straight through: other threads
  // may be logging, and a logger's sink list must not change under them.
  if (impl_->sink)
    impl_->sink->set_view(nullptr);
}

void log_forwarder::set_view(research_view* view) {
  if (impl_->sink)
    impl_->sink->set_view(view);
}

} // namespace quarry::app
