#pragma once
// A body's fingerprint for tests that move large bodies: FNV-1a 64, as 16 hex digits (the echo
// app's /stream route answers the same).
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace test_support {

inline std::string fnv1a_hex(std::string_view bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes)
    hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

} // namespace test_support
