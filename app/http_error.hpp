#pragma once
// app::HttpError: throw it from a handler or middleware to answer with a status and a short
// plain-text message ("422 title is required"). A Router turns it into that response (through
// its error handler when one is set); any other exception is a 500.
#include <stdexcept>
#include <string>

namespace app {

class HttpError : public std::runtime_error {
public:
  HttpError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

private:
  int status_;
};

} // namespace app
