// The SSRF rules: address classification, allow-lists and URL checks.

#include "quarry/fetch/address_policy.hpp"
#include "quarry/fetch/url.hpp"

#include "quarry/sdk/host.hpp"
#include "quarry/sdk/strings.hpp"

#include <arpa/inet.h>

#include <cctype>
#include <cstring>

namespace quarry::fetch {

namespace {

using bytes16 = std::array<uint8_t, 16>;

// Parses a numeric address into 16 bytes (IPv4 as IPv4-mapped IPv6).
std::optional<bytes16> parse_ip(std::string_view text) {
  if (auto pct = text.find('%'); pct != std::string_view::npos)
    text = text.substr(0, pct);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() > 63)
    return std::nullopt;
  std::string str{text};
  bytes16 out{};
  in_addr v4{};
  if (inet_pton(AF_INET, str.c_str(), &v4) == 1) {
    out[10] = 0xff;
    out[11] = 0xff;
    std::memcpy(out.data() + 12, &v4, 4);
    return out;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, str.c_str(), &v6) == 1) {
    std::memcpy(out.data(), &v6, 16);
    return out;
  }
  return std::nullopt;
}

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0)
      return false;
  return true;
}

address_class classify_v4(const uint8_t* a) {
  auto b0 = a[0];
  auto b1 = a[1];
  auto b2 = a[2];
  if (b0 == 0)
    return address_class::unspecified;
  if (b0 == 127)
    return address_class::loopback;
  if (b0 == 10 || (b0 == 172 && (b1 & 0xf0) == 16) || (b0 == 192 && b1 == 168))
    return address_class::private_network;
  if (b0 == 169 && b1 == 254)
    return a[2] == 169 && a[3] == 254 ? address_class::cloud_metadata : address_class::link_local;
  if (b0 == 100 && (b1 & 0xc0) == 64)
    return address_class::shared_cgnat;
  if (b0 >= 224 && b0 <= 239)
    return address_class::multicast;
  if (b0 >= 240)
    return address_class::reserved; // 240/4 and 255.255.255.255
  if (b0 == 192 && b1 == 0 && b2 == 0)
    return address_class::reserved; // IETF protocol assignments
  if ((b0 == 192 && b1 == 0 && b2 == 2) || (b0 == 198 && b1 == 51 && b2 == 100)
      || (b0 == 203 && b1 == 0 && b2 == 113))
    return address_class::documentation;
  if (b0 == 198 && (b1 & 0xfe) == 18)
    return address_class::reserved; // benchmarking 198.18/15
  return address_class::none;
}

address_class classify_bytes(const bytes16& a) {
  // IPv4-mapped ::ffff:0:0/96 and IPv4-compatible ::/96.
  if (all_zero(a.data(), 10) && a[10] == 0xff && a[11] == 0xff)
    return classify_v4(a.data() + 12);
  if (all_zero(a.data(), 12)) {
    if (all_zero(a.data() + 12, 4))
      return address_class::unspecified;
    if (all_zero(a.data() + 12, 3) && a[15] == 1)
      return address_class::loopback;
    return classify_v4(a.data() + 12);
  }
  // NAT64 64:ff9b::/96 (and the local-use 64:ff9b:1::/48).
  if (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b) {
    if (all_zero(a.data() + 4, 8))
      return classify_v4(a.data() + 12);
    return address_class::private_network;
  }
  // 6to4 2002::/16 embeds an IPv4 address in bytes 2-5.
  if (a[0] == 0x20 && a[1] == 0x02)
    return classify_v4(a.data() + 2);
  if (a[0] == 0xff)
    return address_class::multicast;
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
    return address_class::link_local;
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
    return address_class::private_network; // deprecated site-local fec0::/10
  if ((a[0] & 0xfe) == 0xfc) {
    // fd00:ec2::254 is the AWS metadata service over IPv6.
    static constexpr bytes16 aws{0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54};
    return a == aws ? address_class::cloud_metadata : address_class::unique_local;
  }
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8)
    return address_class::documentation;
  if (a[0] == 0x01 && a[1] == 0x00 && all_zero(a.data() + 2, 6))
    return address_class::reserved; // discard-only 100::/64
  return address_class::none;
}

bool in_range(const bytes16& prefix, int bits, const bytes16& ip) {
  int full = bits / 8;
  if (std::memcmp(prefix.data(), ip.data(), static_cast<size_t>(full)) != 0)
    return false;
  int rest = bits % 8;
  if (rest == 0)
    return true;
  auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (prefix[static_cast<size_t>(full)] & mask) == (ip[static_cast<size_t>(full)] & mask);
}

sdk::error refused(std::string message) {
  return sdk::make_error(sdk::errc::refused, std::move(message));
}

// Parses one inet_aton part: decimal, octal (leading 0) or hex (0x).
std::optional<uint64_t> parse_part(std::string_view s) {
  if (s.empty())
    return std::nullopt;
  int base = 10;
  if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
    if (s.empty())
      return uint64_t{0};
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  uint64_t value = 0;
  for (auto c : s) {
    auto digit = sdk::hex_digit_value(c);
    if (digit < 0 || digit >= base)
      return std::nullopt;
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
    if (value > 0xffffffffULL)
      return std::nullopt;
  }
  return value;
}

} // namespace

const char* to_string(address_class x) noexcept {
  switch (x) {
    case address_class::none:
      return "public";
    case address_class::unspecified:
      return "unspecified";
    case address_class::loopback:
      return "loopback";
    case address_class::private_network:
      return "private network";
    case address_class::link_local:
      return "link-local";
    case address_class::cloud_metadata:
      return "cloud metadata";
    case address_class::shared_cgnat:
      return "shared (CGNAT)";
    case address_class::multicast:
      return "multicast";
    case address_class::reserved:
      return "reserved";
    case address_class::documentation:
      return "documentation";
    case address_class::unique_local:
      return "unique local";
    case address_class::invalid:
      return "invalid";
  }
  return "invalid";
}

address_class classify_address(std::string_view ip) noexcept {
  auto bytes = parse_ip(ip);
  if (!bytes)
    return address_class::invalid;
  return classify_bytes(*bytes);
}

std::optional<address_range> address_range::parse(std::string_view text) {
  auto slash = text.find('/');
  auto addr = text.substr(0, slash);
  auto bytes = parse_ip(addr);
  if (!bytes)
    return std::nullopt;
  bool v4 = addr.find(':') == std::string_view::npos;
  int bits = 128;
  if (slash != std::string_view::npos) {
    auto len = text.substr(slash + 1);
    if (len.empty() || len.size() > 3)
      return std::nullopt;
    int n = 0;
    for (auto c : len) {
      if (c < '0' || c > '9')
        return std::nullopt;
      n = n * 10 + (c - '0');
    }
    if (n > (v4 ? 32 : 128))
      return std::nullopt;
    bits = v4 ? 96 + n : n;
  }
  address_range out;
  out.prefix = *bytes;
  out.bits = bits;
  return out;
}

bool address_range::contains(std::string_view ip) const noexcept {
  auto bytes = parse_ip(ip);
  return bytes && in_range(prefix, bits, *bytes);
}

std::variant<address_policy, std::string>
address_policy::make(const std::vector<std::string>& allow) {
  address_policy out;
  out.allow_ = allow;
  for (const auto& entry : allow) {
    if (entry.empty())
      return std::string{"empty entry in the allow list"};
    if (auto range = address_range::parse(entry)) {
      out.ranges_.push_back(*range);
      continue;
    }
    bool host_like = true;
    for (auto c : entry)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.'))
        host_like = false;
    if (!host_like || entry.find('/') != std::string::npos)
      return "allow list entry '" + entry + "' is neither an address, a CIDR range nor a host name";
    out.hosts_.push_back(sdk::to_lower(entry));
  }
  return out;
}

std::optional<sdk::error> address_policy::check(std::string_view host, std::string_view ip) const {
  auto bytes = parse_ip(ip);
  if (!bytes)
    return refused("blocked by SSRF protection (not a numeric address: " + std::string{ip} + ")");
  auto cls = classify_bytes(*bytes);
  if (cls == address_class::none)
    return std::nullopt;
  for (const auto& range : ranges_)
    if (in_range(range.prefix, range.bits, *bytes))
      return std::nullopt;
  auto lhost = sdk::to_lower(host);
  for (const auto& allowed : hosts_)
    if (allowed == lhost)
      return std::nullopt;
  return refused("blocked by SSRF protection (URL resolves to an internal "
                 "address: "
                 + std::string{to_string(cls)} + ")");
}

std::optional<sdk::error> address_policy::check_url(std::string_view url) const {
  auto parsed = parse_url(url);
  if (auto* err = std::get_if<std::string>(&parsed))
    return refused(*err);
  const auto* parts = &std::get<fetch::url>(parsed);
  if (parts->scheme != "http" && parts->scheme != "https")
    return refused("only http and https URLs can be opened (not " + parts->scheme + ":)");
  // Numeric hosts, in every spelling the resolver accepts.
  std::optional<std::string> ip;
  if (parse_ip(parts->host))
    ip = parts->host;
  else
    ip = parse_legacy_ipv4(parts->host);
  if (ip)
    return check(parts->host, *ip);
  return std::nullopt;
}

std::optional<std::string> parse_legacy_ipv4(std::string_view host) {
  if (host.empty() || host.size() > 64)
    return std::nullopt;
  std::vector<uint64_t> parts;
  size_t pos = 0;
  while (true) {
    auto dot = host.find('.', pos);
    auto part = parse_part(
      host.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos));
    if (!part)
      return std::nullopt;
    parts.push_back(*part);
    if (dot == std::string_view::npos)
      break;
    pos = dot + 1;
    if (parts.size() == 4)
      return std::nullopt;
  }
  uint64_t value = 0;
  switch (parts.size()) {
    case 1:
      value = parts[0];
      break;
    case 2:
      if (parts[0] > 0xff || parts[1] > 0xffffff)
        return std::nullopt;
      value = parts[0] << 24 | parts[1];
      break;
    case 3:
      if (parts[0] > 0xff || parts[1] > 0xff || parts[2] > 0xffff)
        return std::nullopt;
      value = parts[0] << 24 | parts[1] << 16 | parts[2];
      break;
    default:
      for (auto p : parts)
        if (p > 0xff)
          return std::nullopt;
      value = parts[0] << 24 | parts[1] << 16 | parts[2] << 8 | parts[3];
  }
  return std::to_string(value >> 24 & 0xff) + "." + std::to_string(value >> 16 & 0xff) + "."
         + std::to_string(value >> 8 & 0xff) + "." + std::to_string(value & 0xff);
}

} // namespace quarry::fetch
