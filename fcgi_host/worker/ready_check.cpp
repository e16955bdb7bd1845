#include "fcgi_host/worker/ready_check.hpp"

#include "app/http_error.hpp"
#include "app/request.hpp"
#include "app/response.hpp"

#include <exception>

namespace fcgi_host {

std::string ready_check(app::Handler& handler, const std::string& path) {
  if (path.empty()) return "";
  app::Request request;
  for (const auto& [name, value] : {std::pair<const char*, std::string>{"REQUEST_METHOD", "GET"},
                                    {"REQUEST_URI", path},
                                    {"SCRIPT_NAME", path},
                                    {"DOCUMENT_URI", path},
                                    {"QUERY_STRING", ""},
                                    {"SERVER_PROTOCOL", "HTTP/1.1"},
                                    {"GATEWAY_INTERFACE", "CGI/1.1"},
                                    {"REMOTE_ADDR", "unix:"}})
    request.add_param(name, value);
  request.finish_params();
  app::Response response;
  const std::string what = "ready-path " + path;
  try {
    handler.handle(request, response);
  } catch (const app::HttpError& e) {
    return what + " answered " + std::to_string(e.status());
  } catch (const std::exception& e) {
    return what + " threw: " + e.what();
  } catch (...) {
    return what + " threw something that is not a std::exception";
  }
  if (response.status < 200 || response.status > 299)
    return what + " answered " + std::to_string(response.status) + " (the gate wants 2xx)";
  return "";
}

} // namespace fcgi_host
