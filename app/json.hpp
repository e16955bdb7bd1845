#pragma once
// JSON for handlers, through nlohmann::json (Debian: nlohmann-json3-dev). A separate header: a
// handler that does not include it does not compile or link any JSON code.
//
//   #include "app/json.hpp"
//   router.post("/notes", [](const app::Request& req, app::Response& res) {
//     nlohmann::json in = app::read_json(req);           // 415 / 400 on bad input
//     app::write_json(res, {{"id", 1}, {"title", in["title"]}}, 201);
//   });
#include "app/http_error.hpp"
#include "app/request.hpp"
#include "app/response.hpp"
#include "app/text.hpp"

#include <nlohmann/json.hpp>

namespace app {

// The request body as JSON. Throws HttpError 415 when the Content-Type is not application/json
// (or a +json type), 400 when the body is not valid JSON: a client's mistake, never a 500.
inline nlohmann::json read_json(const Request& request) {
  std::string_view t = media_type(request.header("Content-Type"));
  bool json = iequals(t, "application/json") ||
              (t.size() > 17 && iequals(t.substr(0, 12), "application/") &&
               iequals(t.substr(t.size() - 5), "+json"));
  if (!json) throw HttpError(415, "expected a JSON body (Content-Type: application/json)");
  nlohmann::json value = nlohmann::json::parse(request.body(), nullptr, false);
  if (value.is_discarded()) throw HttpError(400, "the body is not valid JSON");
  return value;
}

// Sets the body to `value` as JSON (invalid UTF-8 in strings replaced by U+FFFD rather than
// thrown on), Content-Type application/json, and the status.
inline void write_json(Response& response, const nlohmann::json& value, int status = 200) {
  response.status = status;
  response.set_content(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                       "application/json");
}

} // namespace app
