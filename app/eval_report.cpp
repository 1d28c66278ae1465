// `quarry eval report` (eval_report.hpp).

#include "eval_report.hpp"

#include "eval_result.hpp"
#include "report_render.hpp"

#include "quarry/sdk/strings.hpp"
#include "quarry/sdk/text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace quarry::app::eval {

namespace {

using nlohmann::json;

std::optional<double> number_at(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (auto key : path) {
    if (!at->is_object())
      return std::nullopt;
    auto i = at->find(key);
    if (i == at->end())
      return std::nullopt;
    at = &*i;
  }
  if (!at->is_number())
    return std::nullopt;
  return at->get<double>();
}

std::optional<double> size_at(const json& j, const char* key) {
  auto i = j.find(key);
  if (i == j.end() || !i->is_array())
    return std::nullopt;
  return static_cast<double>(i->size());
}

// The value of metric `key` in a result.
std::optional<double> value_of(const json& r, const std::string& key) {
  if (key == "found")
    return number_at(r, {"sources_found"});
  if (key == "read")
    return number_at(r, {"sources_read"});
  if (key == "citations")
    return number_at(r, {"citations"});
  if (key == "cited")
    return number_at(r, {"unique_cited_sources"});
  if (key == "claims")
    return number_at(r, {"claims", "claims"});
  if (key == "supported")
    return number_at(r, {"claims", "supported"});
  if (key == "unsupported")
    return number_at(r, {"claims", "unsupported"});
  if (key == "verified_pct") {
    auto verified = number_at(r, {"claims", "verified"});
    auto rate = number_at(r, {"claims", "rate"});
    if (!verified || *verified <= 0 || !rate)
      return std::nullopt;
    return *rate * 100.0;
  }
  if (key == "must_cite_pct") {
    auto recall = number_at(r, {"must_cite", "recall"});
    if (!recall)
      return std::nullopt;
    return *recall * 100.0;
  }
  if (key == "tokens")
    return number_at(r, {"tokens", "total"});
  if (key == "cost_usd")
    return number_at(r, {"cost_usd"});
  if (key == "seconds")
    return number_at(r, {"seconds"});
  if (key == "errors")
    return size_at(r, "errors");
  return std::nullopt;
}

// Metrics that a failed research has too.
bool kept_when_failed(const std::string& key) {
  return key == "tokens" || key == "cost_usd" || key == "seconds" || key == "errors";
}

std::string format_number(double v, int decimals) {
  if (decimals == 0) {
    auto r = std::llround(v);
    return sdk::digit_groups(static_cast<int64_t>(r));
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// A mean or a median: one more digit than the values have, up to 1,000
// (a mean of 12,345.6 tokens is shown as 12,346).
std::string format_summary(double v, int decimals) {
  if (decimals == 0 && std::fabs(v) >= 1000)
    return format_number(v, 0);
  return format_number(v, std::max(decimals, 1));
}

std::string format_change(double v, int decimals) {
  auto text = format_number(std::fabs(v), decimals);
  auto zero = format_number(0, decimals);
  if (text == zero)
    return zero;
  return (v < 0 ? "-" : "+") + text;
}

// Cuts `text` to `width` code points (ending with "...").
std::string cut(const std::string& text, size_t width) {
  auto clean = sdk::strip_terminal_controls(text);
  size_t points = 0;
  for (size_t i = 0; i < clean.size();
       i += std::max<size_t>(1, sdk::utf8_sequence_length(clean, i)))
    ++points;
  if (points <= width)
    return clean;
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < clean.size() && n + 3 < width; ++n) {
    auto len = std::max<size_t>(1, sdk::utf8_sequence_length(clean, i));
    out.append(clean, i, len);
    i += len;
  }
  return out + "...";
}

size_t columns_of(const std::string& text) {
  size_t points = 0;
  for (size_t i = 0; i < text.size(); i += std::max<size_t>(1, sdk::utf8_sequence_length(text, i)))
    ++points;
  return points;
}

// Rows of cells as an aligned table: the first `left` columns aligned left,
// the others right; two spaces between columns; `rule_after` lists the rows
// after which a line of dashes goes.
std::string render(const std::vector<std::vector<std::string>>& cells, size_t left,
                   const std::set<size_t>& rule_after) {
  std::vector<size_t> widths;
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) {
      if (widths.size() <= c)
        widths.push_back(0);
      widths[c] = std::max(widths[c], columns_of(row[c]));
    }
  size_t total = 0;
  for (auto w : widths)
    total += w + 2;
  std::string out;
  for (size_t r = 0; r < cells.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < cells[r].size(); ++c) {
      auto pad = std::string(widths[c] - columns_of(cells[r][c]), ' ');
      if (c > 0)
        line += "  ";
      line += c < left ? cells[r][c] + pad : pad + cells[r][c];
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out += line + "\n";
    if (rule_after.count(r) != 0)
      out += std::string(total > 2 ? total - 2 : 0, '-') + "\n";
  }
  return out;
}

const metric* find_metric(const std::string& key) {
  for (const auto& m : metrics())
    if (key == m.key)
      return &m;
  return nullptr;
}

std::string count_line(const run_summary& run) {
  auto n = run.rows.size();
  std::string out = run.dir + ": " + std::to_string(n) + (n == 1 ? " question, " : " questions, ")
                    + std::to_string(run.completed) + " completed, " + std::to_string(run.failed)
                    + " failed, " + std::to_string(run.not_run) + " not run";
  auto opts = run.options;
  std::string with;
  if (opts.is_object())
    for (const char* key : {"strategy", "mode", "depth"})
      if (auto v = opts.value(key, std::string{}); !v.empty())
        with += std::string{with.empty() ? "" : ", "} + key + " " + v;
  if (opts.is_object() && opts.value("verify", "") == "off")
    with += std::string{with.empty() ? "" : ", "} + "not verified";
  if (!with.empty())
    out += " (" + with + ")";
  return out;
}

} // namespace

const std::vector<metric>& metrics() {
  static const std::vector<metric> all = {
    {"found", "found", "sources found (search results and pages)", 0, true},
    {"read", "read", "sources read (pages opened, corpus passages)", 0, true},
    {"citations", "cites", "citation markers in the report", 0, true},
    {"cited", "cited", "unique sources cited", 0, true},
    {"claims", "claims", "claims checked in the report", 0, true},
    {"supported", "supp", "claims supported by their source", 0, true},
    {"unsupported", "unsup", "claims not supported by their source", 0, false},
    {"verified_pct", "verif%", "supported share of the judged claims (%)", 0, true},
    {"must_cite_pct", "must%", "expected sources cited (%)", 0, true},
    {"tokens", "tokens", "tokens (input and output)", 0, false},
    {"cost_usd", "cost$", "cost (USD)", 4, false},
    {"seconds", "time s", "time (s)", 1, false},
    {"errors", "errors", "error packets", 0, false},
  };
  return all;
}

run_summary summarize(const run_folder& folder) {
  run_summary out;
  out.dir = folder.dir;
  out.options = folder.manifest.value("options", json::object());
  std::set<std::string> unreadable;
  for (const auto& u : folder.unreadable)
    unreadable.insert(u.substr(0, u.find(':')));
  for (const auto& q : folder.questions) {
    question_row row;
    row.id = id_text(q.id);
    row.key = q.key;
    auto it = folder.results.find(q.key);
    if (it == folder.results.end()) {
      row.status = unreadable.count("results/" + file_stem(q.key) + ".json") != 0 ? "unreadable"
                                                                                  : "not run";
      ++out.not_run;
      out.rows.push_back(std::move(row));
      continue;
    }
    const auto& r = it->second;
    row.status = r.value("status", std::string{"unknown"});
    auto completed = is_finished(r, q);
    if (completed)
      ++out.completed;
    else
      ++out.failed;
    for (const auto& m : metrics()) {
      if (!completed && !kept_when_failed(m.key))
        continue;
      if (auto v = value_of(r, m.key))
        row.values[m.key] = *v;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

std::vector<double> values_of(const run_summary& run, const std::string& metric_key) {
  std::vector<double> out;
  for (const auto& row : run.rows) {
    if (row.status != "completed")
      continue;
    if (auto it = row.values.find(metric_key); it != row.values.end())
      out.push_back(it->second);
  }
  return out;
}

double mean_of(const std::vector<double>& values) {
  if (values.empty())
    return 0;
  double sum = 0;
  for (auto v : values)
    sum += v;
  return sum / static_cast<double>(values.size());
}

double median_of(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  auto n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string table_text(const run_summary& run) {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header{"id", "status"};
  for (const auto& m : metrics())
    header.emplace_back(m.header);
  cells.push_back(header);
  for (const auto& row : run.rows) {
    std::vector<std::string> line{cut(row.id, 24), row.status};
    for (const auto& m : metrics()) {
      auto it = row.values.find(m.key);
      line.push_back(it == row.values.end() ? "-" : format_number(it->second, m.decimals));
    }
    cells.push_back(std::move(line));
  }
  std::set<size_t> rules{0};
  if (run.completed > 0) {
    rules.insert(cells.size() - 1);
    std::vector<std::string> mean{"mean", ""};
    std::vector<std::string> median{"median", ""};
    std::vector<std::string> total{"total", ""};
    for (const auto& m : metrics()) {
      auto vs = values_of(run, m.key);
      mean.push_back(vs.empty() ? "-" : format_summary(mean_of(vs), m.decimals));
      median.push_back(vs.empty() ? "-" : format_summary(median_of(vs), m.decimals));
      // Sums of what a run spends, over every question (failed ones too).
      std::string sum = "";
      if (kept_when_failed(m.key)) {
        double s = 0;
        for (const auto& row : run.rows)
          if (auto it = row.values.find(m.key); it != row.values.end())
            s += it->second;
        sum = format_number(s, m.decimals);
      }
      total.push_back(sum);
    }
    cells.push_back(std::move(mean));
    cells.push_back(std::move(median));
    cells.push_back(std::move(total));
  }
  return count_line(run) + "\n\n" + render(cells, 2, rules);
}

std::string diff_text(const run_summary& a, const run_summary& b) {
  static const std::vector<std::string> shown = {
    "read", "cited", "claims", "verified_pct", "tokens", "seconds", "must_cite_pct"};
  std::map<std::string, const question_row*> in_b;
  for (const auto& row : b.rows)
    in_b.emplace(row.key, &row);
  std::set<std::string> in_a;
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header{"id", "status"};
  for (const auto& key : shown)
    header.push_back(std::string{"+/- "} + find_metric(key)->header);
  cells.push_back(header);
  auto change = [](const question_row& x, const question_row& y, const std::string& key) {
    auto i = x.values.find(key);
    auto j = y.values.find(key);
    if (i == x.values.end() || j == y.values.end() || x.status != "completed"
        || y.status != "completed")
      return std::string{"-"};
    return format_change(j->second - i->second, find_metric(key)->decimals);
  };
  for (const auto& row : a.rows) {
    in_a.insert(row.key);
    std::vector<std::string> line{cut(row.id, 24)};
    auto it = in_b.find(row.key);
    if (it == in_b.end()) {
      line.push_back("only in the first run");
      for (size_t i = 0; i < shown.size(); ++i)
        line.emplace_back("-");
    } else {
      const auto& other = *it->second;
      line.push_back(row.status == other.status ? row.status : row.status + " -> " + other.status);
      for (const auto& key : shown)
        line.push_back(change(row, other, key));
    }
    cells.push_back(std::move(line));
  }
  for (const auto& row : b.rows) {
    if (in_a.count(row.key) != 0)
      continue;
    std::vector<std::string> line{cut(row.id, 24), "only in the second run"};
    for (size_t i = 0; i < shown.size(); ++i)
      line.emplace_back("-");
    cells.push_back(std::move(line));
  }
  std::string out = "Difference per question (second run - first run):\n  first:  " + count_line(a)
                    + "\n  second: " + count_line(b) + "\n\n" + render(cells, 2, {0});
  // Overall: over the questions completed in both runs.
  std::vector<std::vector<std::string>> overall;
  overall.push_back({"metric", "first", "second", "change", "up", "down", "questions"});
  size_t paired = 0;
  std::map<std::string, const question_row*> in_a_rows;
  for (const auto& row : a.rows)
    in_a_rows.emplace(row.key, &row);
  for (const auto& row : b.rows)
    if (auto it = in_a_rows.find(row.key);
        it != in_a_rows.end() && row.status == "completed" && it->second->status == "completed")
      ++paired;
  for (const auto& m : metrics()) {
    std::vector<double> xs;
    std::vector<double> ys;
    size_t up = 0;
    size_t down = 0;
    for (const auto& row : b.rows) {
      auto it = in_a_rows.find(row.key);
      if (it == in_a_rows.end() || row.status != "completed" || it->second->status != "completed")
        continue;
      auto i = it->second->values.find(m.key);
      auto j = row.values.find(m.key);
      if (i == it->second->values.end() || j == row.values.end())
        continue;
      xs.push_back(i->second);
      ys.push_back(j->second);
      if (j->second > i->second)
        ++up;
      else if (j->second < i->second)
        ++down;
    }
    if (xs.empty()) {
      overall.push_back({m.header, "-", "-", "-", "-", "-", "0"});
      continue;
    }
    auto change = mean_of(ys) - mean_of(xs);
    auto d = m.decimals == 0 && std::fabs(mean_of(xs)) >= 1000 ? 0 : std::max(m.decimals, 1);
    overall.push_back({m.header, format_summary(mean_of(xs), m.decimals),
                       format_summary(mean_of(ys), m.decimals), format_change(change, d),
                       std::to_string(up), std::to_string(down), std::to_string(xs.size())});
  }
  auto counts = [](const run_summary& r) {
    return std::to_string(r.completed) + " of " + std::to_string(r.rows.size());
  };
  out += "\nOverall (means over the " + std::to_string(paired)
         + " questions completed in both runs; completed: " + counts(a) + " -> " + counts(b)
         + "):\n\n" + render(overall, 1, {0});
  return out;
}

namespace {

const char* run_colour(size_t i) {
  static const char* colours[] = {"#2f6fb0", "#d0662c"};
  return colours[i % 2];
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Quantile `q` (0-1) of sorted values, linear between ranks.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return 0;
  auto pos = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// One metric's distribution over the questions of each run, as an SVG.
std::string distribution_chart(const metric& m, const std::vector<run_summary>& runs) {
  const double width = 640;
  const double left = 90;
  const double right = 20;
  const double row_h = 36;
  const double top = 10;
  std::vector<std::vector<double>> values;
  double lo = 0;
  double hi = 0;
  for (const auto& r : runs) {
    auto vs = values_of(r, m.key);
    std::sort(vs.begin(), vs.end());
    for (auto v : vs) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    values.push_back(std::move(vs));
  }
  if (hi <= lo)
    hi = lo + 1;
  // Four steps of a round size (1, 1.5, 2, 2.5, 3, 4, 5 or 7.5 times a power
  // of ten).
  auto raw = (hi - lo) / 4;
  auto power = std::pow(10.0, std::floor(std::log10(raw)));
  auto f = raw / power;
  double step = 10 * power;
  for (double nice : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5})
    if (f <= nice) {
      step = nice * power;
      break;
    }
  hi = lo + 4 * step;
  // Enough digits to tell the ticks apart.
  int tick_decimals = 0;
  while (tick_decimals < 4
         && std::fabs(step * std::pow(10.0, tick_decimals)
                      - std::round(step * std::pow(10.0, tick_decimals)))
              > 1e-9)
    ++tick_decimals;
  auto x = [&](double v) { return left + (v - lo) / (hi - lo) * (width - left - right); };
  auto height = top + row_h * static_cast<double>(runs.size()) + 28;
  std::string svg = "<svg width=\"" + num(width) + "\" height=\"" + num(height)
                    + "\" viewBox=\"0 0 " + num(width) + " " + num(height)
                    + "\" role=\"img\" aria-label=\"" + escape_html(m.title) + "\">";
  // Axis with five ticks.
  auto axis_y = top + row_h * static_cast<double>(runs.size()) + 4;
  svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(width - right)
         + "\" y2=\"" + num(axis_y) + "\" stroke=\"#888\"/>";
  for (int t = 0; t <= 4; ++t) {
    auto v = lo + (hi - lo) * t / 4.0;
    svg += "<line x1=\"" + num(x(v)) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(x(v))
           + "\" y2=\"" + num(axis_y + 4) + "\" stroke=\"#888\"/>";
    svg += "<text x=\"" + num(x(v)) + "\" y=\"" + num(axis_y + 16)
           + "\" text-anchor=\"middle\" font-size=\"11\">"
           + escape_html(format_number(v, tick_decimals)) + "</text>";
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    auto cy = top + row_h * static_cast<double>(i) + row_h / 2;
    const auto& vs = values[i];
    svg += "<text x=\"4\" y=\"" + num(cy + 4) + "\" font-size=\"12\">run " + std::to_string(i + 1)
           + " (" + std::to_string(vs.size()) + ")</text>";
    if (vs.empty())
      continue;
    auto q1 = quantile(vs, 0.25);
    auto q3 = quantile(vs, 0.75);
    auto med = quantile(vs, 0.5);
    svg += "<line x1=\"" + num(x(vs.front())) + "\" y1=\"" + num(cy) + "\" x2=\""
           + num(x(vs.back())) + "\" y2=\"" + num(cy) + "\" stroke=\"" + run_colour(i) + "\"/>";
    svg += "<rect x=\"" + num(x(q1)) + "\" y=\"" + num(cy - 10) + "\" width=\""
           + num(std::max(1.0, x(q3) - x(q1))) + "\" height=\"20\" fill=\"" + run_colour(i)
           + "\" fill-opacity=\"0.18\" stroke=\"" + run_colour(i) + "\"/>";
    svg += "<line class=\"median\" x1=\"" + num(x(med)) + "\" y1=\"" + num(cy - 10) + "\" x2=\""
           + num(x(med)) + "\" y2=\"" + num(cy + 10) + "\" stroke=\"" + run_colour(i)
           + "\" stroke-width=\"2\"/>";
    for (auto v : vs)
      svg += "<circle cx=\"" + num(x(v)) + "\" cy=\"" + num(cy) + "\" r=\"3.5\" fill=\""
             + run_colour(i) + "\" fill-opacity=\"0.6\"><title>"
             + escape_html(format_number(v, m.decimals)) + "</title></circle>";
    auto mean = mean_of(vs);
    svg += "<path d=\"M" + num(x(mean)) + " " + num(cy - 16) + " l5 5 l-5 5 l-5 -5 z\" fill=\""
           + run_colour(i) + "\"><title>mean " + escape_html(format_number(mean, 1))
           + "</title></path>";
  }
  svg += "</svg>";
  return svg;
}

std::string html_table(const run_summary& run) {
  std::string out = "<table><thead><tr><th>id</th><th>status</th>";
  for (const auto& m : metrics())
    out += "<th title=\"" + escape_html(m.title) + "\">" + escape_html(m.header) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : run.rows) {
    out += "<tr><td>" + escape_html(row.id) + "</td><td>" + escape_html(row.status) + "</td>";
    for (const auto& m : metrics()) {
      auto it = row.values.find(m.key);
      out += "<td class=\"n\">"
             + (it == row.values.end() ? std::string{"-"}
                                       : escape_html(format_number(it->second, m.decimals)))
             + "</td>";
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  return out;
}

} // namespace

std::string html_page(const std::vector<run_summary>& runs) {
  std::string out = R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Quarry evaluation</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}h3{font-size:1em;margin:1.2em 0 .3em}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border-bottom:1px solid #ddd;padding:2px 6px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.key span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}
</style></head><body>
<h1>Quarry evaluation</h1>
<p class="key">)";
  for (size_t i = 0; i < runs.size(); ++i)
    out += "<span style=\"background:" + std::string{run_colour(i)} + "\"></span>run "
           + std::to_string(i + 1) + ": " + escape_html(count_line(runs[i]));
  out += "</p>\n<h2>Distributions over the completed questions</h2>\n"
         "<p>Each dot is a question; the box spans the middle half, the bar in it is the "
         "median and the diamond the mean.</p>\n";
  for (const auto& m : metrics()) {
    out += "<section class=\"chart\" id=\"chart-" + std::string{m.key} + "\"><h3>"
           + escape_html(m.title) + "</h3>\n" + distribution_chart(m, runs) + "</section>\n";
  }
  if (runs.size() == 2)
    out += "<h2>Difference</h2>\n<pre>" + escape_html(diff_text(runs[0], runs[1])) + "</pre>\n";
  for (size_t i = 0; i < runs.size(); ++i)
    out += "<h2>Run " + std::to_string(i + 1) + "</h2>\n<p>" + escape_html(count_line(runs[i]))
           + "</p>\n" + html_table(runs[i]) + "\n";
  out += "</body></html>\n";
  return out;
}

std::string html_escape(const std::string& text) {
  return app::escape_html(text);
}

} // namespace quarry::app::eval
