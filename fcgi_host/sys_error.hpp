#pragma once
// How the host reports a failure: nginx-style error text, `bind("/run/x.sock") failed: Address
// already in use`, and the error that refuses a start (or a reload's new configuration).
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fcgi_host {

// A start (or a reload's new configuration) cannot go on; the message, one log line, names the
// option, or the call and its object.
class StartupError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

inline std::string sys_error(const char* call, const std::string& object, int err = errno) {
  return std::string(call) + "(\"" + object + "\") failed: " + std::strerror(err);
}

} // namespace fcgi_host
