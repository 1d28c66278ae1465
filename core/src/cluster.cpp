// The policies of a cluster of nodes (see cluster.hpp).

#include "quarry/core/cluster.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace quarry::core {

std::string node_address::text() const {
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

std::optional<node_address> parse_node_address(std::string_view x) {
  auto colon = x.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= x.size())
    return std::nullopt;
  auto host = x.substr(0, colon);
  auto port_text = x.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']')
      return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return std::nullopt; // an IPv6 address needs brackets
  }
  for (char c : host)
    if (c == ' ' || c == '/' || c == '[' || c == ']' || static_cast<unsigned char>(c) < 0x21)
      return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || value > 65535)
    return std::nullopt;
  return node_address{std::string{host}, static_cast<uint16_t>(value)};
}

bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    return false;
  auto all_loopback = true;
  for (auto* p = found; p != nullptr; p = p->ai_next) {
    if (p->ai_family == AF_INET) {
      auto* in = reinterpret_cast<const sockaddr_in*>(p->ai_addr);
      if ((ntohl(in->sin_addr.s_addr) >> 24) != 127)
        all_loopback = false;
    } else if (p->ai_family == AF_INET6) {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(p->ai_addr);
      if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
        all_loopback = false;
    } else {
      all_loopback = false;
    }
  }
  ::freeaddrinfo(found);
  return all_loopback;
}

std::vector<std::string> missing_tools(const std::vector<std::string>& have,
                                       const std::vector<std::string>& needed) {
  std::vector<std::string> out;
  for (const auto& name : needed)
    if (std::find(have.begin(), have.end(), name) == have.end())
      out.push_back(name);
  return out;
}

std::optional<size_t> choose_worker(const std::vector<worker_view>& workers,
                                    const std::vector<std::string>& needed,
                                    const std::set<size_t>& excluded) {
  std::optional<size_t> best;
  int best_load = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    const auto& w = workers[i];
    if (!w.up || !w.compatible || excluded.count(i) > 0)
      continue;
    if (!missing_tools(w.tools, needed).empty())
      continue;
    auto load = std::max(w.outstanding, w.running);
    if (load >= w.capacity)
      continue;
    if (!best || load < best_load) {
      best = i;
      best_load = load;
    }
  }
  return best;
}

agent_time_limits limits_after(const agent_time_limits& first,
                               std::chrono::milliseconds elapsed) noexcept {
  using std::chrono::milliseconds;
  const milliseconds floor{1000};
  agent_time_limits out;
  out.force_report_after = std::max(first.force_report_after - elapsed, floor);
  out.hard_timeout = std::max(first.hard_timeout - elapsed, floor);
  if (out.hard_timeout < out.force_report_after)
    out.hard_timeout = out.force_report_after;
  return out;
}

std::string refuse_agent_request(const agent_request_view& x, const agent_bounds& bounds) {
  if (x.task.empty())
    return "the task is empty";
  if (x.max_cycles < 1 || x.max_cycles > bounds.max_cycles)
    return "max_cycles " + std::to_string(x.max_cycles) + " is outside 1 to "
           + std::to_string(bounds.max_cycles);
  auto in_time = [&](std::chrono::milliseconds d) { return d.count() > 0 && d <= bounds.max_time; };
  if (!in_time(x.force_report_after) || !in_time(x.hard_timeout))
    return "an agent time limit is outside 1 ms to 24 h";
  if (x.context_tokens < 1 || x.context_tokens > bounds.max_context_tokens)
    return "context_tokens " + std::to_string(x.context_tokens) + " is out of range";
  auto in_tokens = [&](int64_t n) { return n >= 1 && n <= bounds.max_output_tokens; };
  if (!in_tokens(x.step_max_tokens) || !in_tokens(x.report_max_tokens))
    return "an output token limit is out of range";
  return {};
}

} // namespace quarry::core
