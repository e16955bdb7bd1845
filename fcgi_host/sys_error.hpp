#pragma once
// nginx-style error text: `bind("/run/x.sock") failed: Address already in use`.
#include <cerrno>
#include <cstring>
#include <string>

namespace fcgi_host {

inline std::string sys_error(const char* call, const std::string& object, int err = errno) {
  return std::string(call) + "(\"" + object + "\") failed: " + std::strerror(err);
}

} // namespace fcgi_host
