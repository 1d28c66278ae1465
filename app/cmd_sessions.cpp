// `quarry sessions list|show|export|rm|resume`: the research sessions kept
// in the store.

#include "cli.hpp"
#include "context.hpp"
#include "output_file.hpp"
#include "report_export.hpp"
#include "report_render.hpp"
#include "session_store.hpp"
#include "session_usage.hpp"
#include "upload_files.hpp"

#include "quarry/core/checkpoint.hpp"
#include "quarry/core/research_requests.hpp"
#include "quarry/host/services.hpp"
#include "quarry/sdk/strings.hpp"
#include "quarry/store/store.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <unistd.h>

namespace quarry::app {

namespace {

using nlohmann::json;

json session_json(const store::session_row& row, store::session_state state) {
  json j{{"id", row.id},
         {"question", row.question},
         {"state", store::to_string(state)},
         {"parent_id", row.parent_id.empty() ? json(nullptr) : json(row.parent_id)},
         {"created_at", rfc3339(row.created_at)},
         {"updated_at", rfc3339(row.updated_at)},
         {"finished_at", row.finished_at > 0 ? json(rfc3339(row.finished_at)) : json(nullptr)},
         {"last_seq", row.last_seq}};
  if (!row.error.empty())
    j["error"] = row.error;
  return j;
}

// What the command line says when the store cannot be read.
std::string read_failure(const store::store& db, const sdk::error& err) {
  return "the research store cannot be read: " + with_store_path(db.path(), err);
}

// Opens the store for reading and finds session `id`; prints why not (a
// store that cannot be read is never "no session").
struct opened_session {
  std::shared_ptr<store::store> db;
  store::session_row row;
};

std::optional<opened_session> find_session(context& ctx, const std::string& id,
                                           bool write = false) {
  if (!store::is_session_id(id)) {
    std::cerr << "quarry: not a session id: '" << id
              << "' (ids look like q0123456789abcdef; see quarry sessions list)\n";
    return std::nullopt;
  }
  auto opened = open_store(ctx.config.values, !write);
  if (auto* why = std::get_if<std::string>(&opened)) {
    std::cerr << "quarry: the research store cannot be " << (write ? "used: " : "read: ") << *why
              << "\n";
    return std::nullopt;
  }
  auto db = std::get<std::shared_ptr<store::store>>(std::move(opened));
  auto row = db->session(id);
  if (!row) {
    std::cerr << "quarry: " << read_failure(*db, row.error()) << "\n";
    return std::nullopt;
  }
  if (!*row) {
    std::cerr << "quarry: no session " << id << " in " << db->path() << "\n";
    return std::nullopt;
  }
  return opened_session{std::move(db), std::move(**row)};
}

// The store may not exist yet: listing it is then an empty list.
bool store_missing(context& ctx) {
  std::error_code ec;
  return !std::filesystem::exists(store_path(ctx.config.values), ec);
}

} // namespace

int cmd_sessions_list(context& ctx, const sessions_options& opts) {
  store::session_filter f;
  f.search = opts.search;
  f.limit = opts.limit;
  if (opts.limit < 1 || opts.limit > 500) {
    std::cerr << "quarry: --limit must be between 1 and 500\n";
    return exit_usage;
  }
  if (!opts.state.empty()) {
    auto s = store::session_state_from(opts.state);
    if (!s) {
      std::cerr << "quarry: --state: unknown state '" << opts.state
                << "' (pending, running, clarification, completed, failed, "
                   "cancelled, interrupted)\n";
      return exit_usage;
    }
    // A session left `running` by a dead process is interrupted: filter
    // after looking at the locks.
    if (*s != store::session_state::interrupted)
      f.state = *s;
  }
  // Each row with its effective state, read while the store is open.
  std::vector<std::pair<store::session_row, store::session_state>> rows;
  if (!store_missing(ctx)) {
    auto opened = open_store(ctx.config.values, true);
    if (auto* why = std::get_if<std::string>(&opened)) {
      std::cerr << "quarry: the research store cannot be read: " << *why << "\n";
      return exit_failure;
    }
    auto db = std::get<std::shared_ptr<store::store>>(std::move(opened));
    // Interrupted ones are found among all states; pages until the limit.
    for (;;) {
      auto listed = db->list_sessions(f);
      if (!listed) {
        std::cerr << "quarry: " << read_failure(*db, listed.error()) << "\n";
        return exit_failure;
      }
      auto& page = *listed;
      for (auto& r : page.sessions) {
        auto state = effective_state(*db, r);
        if (opts.state.empty() || store::to_string(state) == opts.state)
          rows.emplace_back(std::move(r), state);
      }
      if (page.next_cursor.empty() || static_cast<int>(rows.size()) >= opts.limit)
        break;
      f.before = page.next_cursor;
    }
    if (static_cast<int>(rows.size()) > opts.limit)
      rows.resize(static_cast<size_t>(opts.limit));
  }
  if (opts.json) {
    json out = json::array();
    for (const auto& [r, state] : rows)
      out.push_back(session_json(r, state));
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return exit_ok;
  }
  if (rows.empty()) {
    std::cout << "No sessions.\n";
    return exit_ok;
  }
  for (const auto& [r, state_value] : rows) {
    // The question may come from anyone who can reach `quarry serve`: these
    // lines are for people, so always cleaned (a pipe ends in a terminal too).
    auto q = sdk::strip_terminal_controls(r.question);
    for (auto& c : q)
      if (c == '\n' || c == '\r' || c == '\t')
        c = ' ';
    if (q.size() > 70)
      q = std::string{sdk::utf8_prefix(q, 67)} + "...";
    auto state = std::string{store::to_string(state_value)};
    std::cout << r.id << "  " << state
              << std::string(state.size() < 13 ? 13 - state.size() : 1, ' ')
              << rfc3339(r.created_at).substr(0, 16) << "  " << q << "\n";
  }
  return exit_ok;
}

namespace {

// One line of a claim for people: its index, verdict (and who judged), the
// evidence's source, and the claim.
std::string claim_line(const store::claim_row& c) {
  auto clean = [](std::string text, size_t most) {
    text = sdk::strip_terminal_controls(text);
    for (auto& ch : text)
      if (ch == '\n' || ch == '\r' || ch == '\t')
        ch = ' ';
    if (text.size() > most)
      text = std::string{sdk::utf8_prefix(text, most - 3)} + "...";
    return text;
  };
  std::string out = std::to_string(c.claim) + ". " + c.verdict;
  if (!c.judge.empty())
    out += " (" + c.judge + ")";
  if (c.source) {
    out += ", evidence [" + std::to_string(*c.source) + "]";
    if (c.snippet_only)
      out += " snippet only";
  }
  if (c.recited_to)
    out += ", re-cited to [" + std::to_string(*c.recited_to) + "]";
  out += "\n   " + clean(c.text, 200) + "\n";
  if (c.source && !c.evidence.empty())
    out += "   > " + clean(c.evidence, 200) + "\n";
  return out;
}

// `quarry sessions show ID --claims [--json]`.
int show_claims(store::store& db, const std::string& id, bool as_json) {
  // Numbered as the report shows its sources.
  auto claims = shown_claims(db, id);
  if (!claims) {
    std::cerr << "quarry: " << read_failure(db, claims.error()) << "\n";
    return exit_failure;
  }
  auto j = claims_json(id, *claims);
  if (as_json) {
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return exit_ok;
  }
  if (claims->empty()) {
    std::cout << "Session " << id << " has no verified claims (its report was not verified, "
              << "or it has no report yet).\n";
    return exit_ok;
  }
  const auto& sum = j["summary"];
  std::cout << "Claims of session " << id << ": " << sum["claims"].get<int64_t>() << ", "
            << sum["supported"].get<int64_t>() << " supported, "
            << sum["partly_supported"].get<int64_t>() << " partly supported, "
            << sum["unsupported"].get<int64_t>() << " unsupported, "
            << sum["no_evidence"].get<int64_t>() << " without evidence, "
            << sum["unverified"].get<int64_t>() << " unverified";
  if (auto n = sum["snippet_only"].get<int64_t>(); n > 0)
    std::cout << "; " << n << " judged on a search snippet only";
  std::cout << "\n\n";
  for (const auto& c : *claims)
    std::cout << claim_line(c);
  return exit_ok;
}

} // namespace

int cmd_sessions_show(context& ctx, const sessions_options& opts) {
  auto s = find_session(ctx, opts.id);
  if (!s)
    return exit_failure;
  auto& db = *s->db;
  if (opts.claims)
    return show_claims(db, opts.id, opts.format == "json");
  auto state = effective_state(db, s->row);
  auto read = stored_report(db, s->row, state);
  if (!read) {
    std::cerr << "quarry: " << read_failure(db, read.error()) << "\n";
    return exit_failure;
  }
  auto& report = *read;
  if (opts.format == "md" || opts.format == "html") {
    if (!report) {
      std::cerr << "quarry: session " << opts.id << " has no report (" << store::to_string(state)
                << ")\n";
      return exit_failure;
    }
    // Data: byte for byte into a pipe or a file, cleaned on a terminal.
    std::cout << printed_report(opts.format == "md" ? markdown_report(*report)
                                                    : html_report(*report),
                                ::isatty(STDOUT_FILENO) == 1)
              << std::flush;
    return exit_ok;
  }
  auto usage_read = db.usage_groups(opts.id);
  auto children = db.children(opts.id);
  for (const auto* err :
       {usage_read ? nullptr : &usage_read.error(), children ? nullptr : &children.error()})
    if (err != nullptr) {
      std::cerr << "quarry: " << read_failure(db, *err) << "\n";
      return exit_failure;
    }
  auto usage = summarize_usage(*usage_read);
  auto duration_ms = session_duration_ms(s->row, state, unix_ms());
  std::vector<std::string> follow_ups;
  for (const auto& c : *children)
    follow_ups.push_back(c.id);
  if (opts.format == "json") {
    auto j = session_json(s->row, state);
    j["options"] = s->row.options;
    j["duration_ms"] = duration_ms;
    j["models"] = session_models_json(usage);
    j["usage"] = session_usage_json(usage);
    j["follow_ups"] = follow_ups;
    json sources = json::array();
    if (report)
      for (const auto& src : report->sources)
        sources.push_back({{"number", src.number},
                           {"title", src.title},
                           {"url", src.url},
                           {"snippet_only", src.snippet_only}});
    j["sources"] = std::move(sources);
    j["report"] = report ? json(report->body) : json(nullptr);
    j["truncated"] = report && core::is_cut_report(report->body);
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return exit_ok;
  }
  std::cout << "Session   " << s->row.id << "\n"
            << "Question  " << sdk::strip_terminal_controls(s->row.question) << "\n"
            << "State     " << store::to_string(state)
            << (s->row.error.empty() ? "" : " (" + sdk::strip_terminal_controls(s->row.error) + ")")
            << "\n"
            << "Created   " << rfc3339(s->row.created_at) << "\n";
  if (s->row.finished_at > 0)
    std::cout << "Finished  " << rfc3339(s->row.finished_at) << "\n";
  if (!s->row.parent_id.empty())
    std::cout << "Follows   " << s->row.parent_id << "\n";
  for (const auto& f : follow_ups)
    std::cout << "Follow-up " << f << "\n";
  char took[32];
  std::snprintf(took, sizeof(took), "%.1f s", static_cast<double>(duration_ms) / 1000.0);
  std::cout << "Duration  " << took << "\n";
  // The names come from configuration and model servers: cleaned.
  for (const auto& m : usage.models)
    std::cout << "Model     " << sdk::strip_terminal_controls(m.role) << ": "
              << sdk::strip_terminal_controls(m.provider) << " "
              << (m.offline ? std::string{"(no model)"} : sdk::strip_terminal_controls(m.model))
              << "\n";
  std::cout << "Packets   " << s->row.last_seq << "\n"
            << "Usage     ";
  if (usage.model_calls() == 0 && usage.offline_calls > 0) {
    std::cout << "no model (" << usage.offline_calls
              << (usage.offline_calls == 1 ? " offline call)" : " offline calls)");
  } else {
    std::cout << usage.model_calls()
              << (usage.model_calls() == 1 ? " model call, " : " model calls, ")
              << usage.input_tokens << " input and " << usage.output_tokens << " output tokens";
    if (auto cost = cost_text(usage); !cost.empty())
      std::cout << ", " << cost;
    if (usage.offline_calls > 0)
      std::cout << ", " << usage.offline_calls
                << (usage.offline_calls == 1 ? " offline call" : " offline calls");
  }
  std::cout << "\n";
  if (state == store::session_state::interrupted)
    std::cout << "\nResume with: quarry sessions resume " << s->row.id << "\n";
  // The human form is for people: its report is cleaned wherever it goes.
  if (report)
    std::cout << "\n" << sdk::strip_terminal_controls(markdown_report(*report)) << std::flush;
  return exit_ok;
}

namespace {

// `quarry sessions export ID --format md|html|pdf|docx --out FILE`, and PDF
// or DOCX to standard output when it is not a terminal.
int export_report_file(context& ctx, const sessions_options& opts) {
  const auto& cfg = ctx.config.values;
  auto format = export_format_from(opts.format);
  if (!opts.out.empty()) {
    if (auto why = check_output_path(opts.out, database_files(data_dir_of(cfg), store_path(cfg)))) {
      std::cerr << "quarry: " << *why << "\n";
      return exit_usage;
    }
  } else if (::isatty(STDOUT_FILENO) == 1) {
    std::cerr << "quarry: a " << export_extension(*format)
              << " file is not printed on a terminal: give --out FILE, or redirect standard "
                 "output\n";
    return exit_usage;
  }
  if (format) {
    auto tool = find_export_tool(*format);
    if (auto* err = std::get_if<export_error>(&tool)) {
      std::cerr << "quarry: " << err->message << "\n";
      return exit_failure;
    }
  }
  auto s = find_session(ctx, opts.id);
  if (!s)
    return exit_failure;
  auto& db = *s->db;
  auto state = effective_state(db, s->row);
  auto read = stored_report(db, s->row, state);
  if (!read) {
    std::cerr << "quarry: " << read_failure(db, read.error()) << "\n";
    return exit_failure;
  }
  auto& report = *read;
  if (!report) {
    std::cerr << "quarry: session " << opts.id << " has no report (" << store::to_string(state)
              << ")\n";
    return exit_failure;
  }
  report->corpus_root = session_corpus(s->row.options, cfg.research.corpus);
  std::string bytes;
  if (opts.format == "md") {
    bytes = markdown_report(*report);
  } else if (opts.format == "html") {
    bytes = html_report(*report);
  } else {
    auto made = export_report(*report, *format);
    if (auto* err = std::get_if<export_error>(&made)) {
      std::cerr << "quarry: the " << export_extension(*format) << " export of session " << opts.id
                << " failed: " << err->message << "\n";
      return exit_failure;
    }
    bytes = std::get<std::string>(std::move(made));
  }
  if (opts.out.empty()) {
    std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "quarry: standard output could not be written\n";
      return exit_failure;
    }
    return exit_ok;
  }
  if (auto why = write_output_file(opts.out, bytes)) {
    std::cerr << "quarry: " << *why << "\n";
    return exit_failure;
  }
  std::cerr << "quarry: wrote " << opts.out << "\n";
  return exit_ok;
}

} // namespace

int cmd_sessions_export(context& ctx, const sessions_options& opts) {
  if (!opts.out.empty() && (opts.format == "jsonl" || opts.format == "claims")) {
    std::cerr << "quarry: --out takes a report format (md, html, pdf or docx), not " << opts.format
              << "\n";
    return exit_usage;
  }
  if (!opts.out.empty() || export_format_from(opts.format))
    return export_report_file(ctx, opts);
  auto s = find_session(ctx, opts.id);
  if (!s)
    return exit_failure;
  auto& db = *s->db;
  if (opts.format == "jsonl") {
    uint64_t from = 1;
    for (;;) {
      auto read = db.packets(opts.id, from, 4096);
      if (!read) {
        std::cout << std::flush;
        std::cerr << "quarry: " << read_failure(db, read.error()) << "\n";
        return exit_failure;
      }
      auto& page = *read;
      for (const auto& p : page)
        std::cout << p.line << '\n';
      if (page.size() < 4096)
        break;
      from = page.back().seq + 1;
    }
    std::cout << std::flush;
    return exit_ok;
  }
  if (opts.format == "claims") {
    auto claims = shown_claims(db, opts.id);
    if (!claims) {
      std::cerr << "quarry: " << read_failure(db, claims.error()) << "\n";
      return exit_failure;
    }
    for (const auto& c : *claims)
      std::cout << store::to_json(c).dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    std::cout << std::flush;
    return exit_ok;
  }
  sessions_options show = opts;
  return cmd_sessions_show(ctx, show);
}

int cmd_sessions_rm(context& ctx, const sessions_options& opts) {
  auto s = find_session(ctx, opts.id, true);
  if (!s)
    return exit_failure;
  auto lock = session_lock::take(s->db->path(), opts.id);
  if (auto* why = std::get_if<std::string>(&lock)) {
    std::cerr << "quarry: " << *why << "; stop it before removing it\n";
    return exit_failure;
  }
  auto removed = s->db->remove(opts.id);
  if (auto* err = std::get_if<sdk::error>(&removed)) {
    std::cerr << "quarry: session " << opts.id
              << " was not removed: " << with_store_path(s->db->path(), *err) << "\n";
    return exit_failure;
  }
  if (!std::get<bool>(removed)) {
    std::cerr << "quarry: session " << opts.id << " was removed by another process\n";
    return exit_failure;
  }
  // Its uploaded files and their index (a session started by quarry serve)
  // go with it.
  if (auto why = remove_session_folder(data_dir_of(ctx.config.values), opts.id); !why.empty()) {
    std::cerr << "quarry: removed session " << opts.id
              << ", but its files could not be removed: " << why << "\n";
    return exit_failure;
  }
  std::cerr << "quarry: removed session " << opts.id << "\n";
  return exit_ok;
}

int cmd_sessions_resume(context& ctx, const sessions_options& opts,
                        const research_options& research) {
  resume_info info;
  {
    auto s = find_session(ctx, opts.id);
    if (!s)
      return exit_failure;
    auto& db = *s->db;
    auto state = effective_state(db, s->row);
    if (state == store::session_state::running) {
      std::cerr << "quarry: session " << opts.id << " is running in another process\n";
      return exit_failure;
    }
    if (state != store::session_state::interrupted) {
      std::cerr << "quarry: session " << opts.id << " is " << store::to_string(state)
                << "; only an interrupted session can be resumed"
                << (state == store::session_state::clarification
                      ? " (answer it with: quarry research --answer \"...\" "
                        "\"<the question>\")"
                      : "")
                << "\n";
      return exit_failure;
    }
    auto options = stored_options_from(s->row.options);
    if (auto* why = std::get_if<std::string>(&options)) {
      std::cerr << "quarry: session " << opts.id
                << " cannot be resumed: " << sdk::strip_terminal_controls(*why) << "\n";
      return exit_failure;
    }
    info.session_id = opts.id;
    info.options = std::get<stored_options>(std::move(options));
    info.last_seq = s->row.last_seq;
    auto checkpoint = db.latest_checkpoint(opts.id);
    if (!checkpoint) {
      std::cerr << "quarry: " << read_failure(db, checkpoint.error()) << "\n";
      return exit_failure;
    }
    if (auto& c = *checkpoint) {
      auto read = core::checkpoint_from_json(c->state);
      if (auto* why = std::get_if<std::string>(&read)) {
        std::cerr << "quarry: session " << opts.id
                  << " cannot be resumed: " << sdk::strip_terminal_controls(*why) << "\n";
        return exit_failure;
      }
      info.checkpoint = std::make_shared<const core::research_checkpoint>(
        std::get<core::research_checkpoint>(std::move(read)));
      info.checkpoint_number = c->number;
      info.checkpoint_seq = c->last_seq;
    }
    std::cerr << "quarry: resuming session " << opts.id
              << (info.checkpoint ? " from checkpoint " + std::to_string(info.checkpoint_number)
                                  : std::string{" from the start (it stopped before "
                                                "its first checkpoint)"})
              << "\n";
  }
  return cmd_research(ctx, research, &info);
}

} // namespace quarry::app
