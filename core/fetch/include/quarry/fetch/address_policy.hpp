// Which network addresses open_url and `quarry extract` may connect to: the
// SSRF rules, applied to the resolved address of every connection.
#pragma once

#include "quarry/sdk/types.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace quarry::fetch {

/// Why an address is refused. `none` means it is a public address.
enum class address_class : uint8_t {
  none,
  unspecified,
  loopback,
  private_network,
  link_local,
  cloud_metadata,
  shared_cgnat,
  multicast,
  reserved,
  documentation,
  unique_local,
  invalid,
};

/// A short phrase for an address class, e.g. `loopback`.
const char* to_string(address_class x) noexcept;

/// Classifies a numeric IPv4 or IPv6 address (`1.2.3.4`, `::1`,
/// `::ffff:127.0.0.1`; an IPv6 zone suffix `%eth0` is ignored). IPv4 addresses
/// embedded in IPv6 (mapped, compatible, NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16`) are classified by the embedded address. Anything that is not
/// a numeric address is `invalid`.
address_class classify_address(std::string_view ip) noexcept;

/// A range of addresses in CIDR notation.
struct address_range {
  /// 16 bytes; IPv4 ranges are stored as IPv4-mapped IPv6.
  std::array<uint8_t, 16> prefix{};
  /// Prefix length in bits over the 16 bytes.
  int bits = 0;

  /// Parses `10.0.0.0/8`, `127.0.0.1`, `fd00::/8`, `::1`. Returns nothing for
  /// anything else.
  static std::optional<address_range> parse(std::string_view text);

  /// Returns whether the numeric address `ip` is inside the range.
  bool contains(std::string_view ip) const noexcept;
};

/// The SSRF policy: public addresses are allowed; refused classes can be
/// opened up per address range or per host name by the administrator.
class address_policy {
public:
  /// Builds a policy from allow-list entries: CIDR ranges or single addresses
  /// (`127.0.0.1`, `10.0.0.0/8`, `::1`) and exact host names
  /// (`intranet.example.com`, case-insensitive). Returns a message for an
  /// entry that is neither.
  static std::variant<address_policy, std::string> make(const std::vector<std::string>& allow);

  /// Returns an error (errc::refused) when a connection to `ip` for a URL
  /// whose host is `host` must not be opened; nothing when it may.
  std::optional<sdk::error> check(std::string_view host, std::string_view ip) const;

  /// Checks a URL before any connection: scheme http or https, a host, and a
  /// host that is not a numeric address of a refused class (also written as
  /// `0x7f000001`, `2130706433` or `0177.0.0.1`). Names are checked later on
  /// their resolved addresses.
  std::optional<sdk::error> check_url(std::string_view url) const;

  /// The allow-list entries as given.
  const std::vector<std::string>& allow() const noexcept {
    return allow_;
  }

private:
  std::vector<std::string> allow_;
  std::vector<address_range> ranges_;
  std::vector<std::string> hosts_;
};

/// Parses an IPv4 host the way the C library's `inet_aton` does (one to four
/// parts, each decimal, octal with a leading 0 or hexadecimal with 0x), so
/// that `2130706433` and `0x7f.1` are recognised as addresses. Returns the
/// dotted-quad form.
std::optional<std::string> parse_legacy_ipv4(std::string_view host);

} // namespace quarry::fetch
