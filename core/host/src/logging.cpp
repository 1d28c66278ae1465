// spdlog setup: a stderr sink writing text or JSON lines, masking secrets.

#include "quarry/host/logging.hpp"

#include "quarry/sdk/secrets.hpp"
#include "quarry/sdk/strings.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace quarry::host {

namespace {

std::optional<spdlog::level::level_enum> parse_level(std::string_view x) {
  if (x == "trace")
    return spdlog::level::trace;
  if (x == "debug")
    return spdlog::level::debug;
  if (x == "info")
    return spdlog::level::info;
  if (x == "warn")
    return spdlog::level::warn;
  if (x == "error")
    return spdlog::level::err;
  if (x == "off")
    return spdlog::level::off;
  return std::nullopt;
}

const char* level_name(spdlog::level::level_enum x) {
  switch (x) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

std::string timestamp(spdlog::log_clock::time_point tp) {
  auto secs = std::chrono::system_clock::to_time_t(tp);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(tp.time_since_epoch()).count()
            % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

/// Writes each record as one line to stderr.
class stderr_sink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  enum class style { plain, text, json };

  stderr_sink(style how, std::vector<std::string> secrets)
    : style_(how), secrets_(std::move(secrets)), terminal_(::isatty(STDERR_FILENO) == 1) {
    // nop
  }

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text{msg.payload.data(), msg.payload.size()};
    text = sdk::mask_secrets(std::move(text), secrets_);
    // A record may quote a server's error body or a page title: on a
    // terminal it must not move the cursor or set the title.
    if (terminal_)
      text = sdk::strip_terminal_controls(text);
    std::string line;
    if (style_ == style::plain) {
      // The command's own messages look the same: "quarry: ...".
      line = "quarry: ";
      if (msg.level != spdlog::level::info)
        line += std::string{msg.level == spdlog::level::warn ? "warning" : level_name(msg.level)}
                + ": ";
      line += text;
    } else if (style_ == style::json) {
      nlohmann::json obj{
        {"time", timestamp(msg.time)}, {"level", level_name(msg.level)}, {"msg", text}};
      line = obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      line = timestamp(msg.time) + " " + level_name(msg.level) + " " + text;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
  }

  void flush_() override {
    std::fflush(stderr);
  }

private:
  style style_;
  std::vector<std::string> secrets_;
  bool terminal_;
};

} // namespace

bool valid_log_level(std::string_view level) {
  return parse_level(level).has_value();
}

void setup_logging(std::string_view level, std::string_view format,
                   std::vector<std::string> secrets) {
  auto how = format == "json"    ? stderr_sink::style::json
             : format == "plain" ? stderr_sink::style::plain
                                 : stderr_sink::style::text;
  auto sink = std::make_shared<stderr_sink>(how, std::move(secrets));
  auto logger = std::make_shared<spdlog::logger>("quarry", std::move(sink));
  logger->set_level(parse_level(level).value_or(spdlog::level::info));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

} // namespace quarry::host
