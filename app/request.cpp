#include "app/request.hpp"

namespace app {
namespace {

char header_char(char c) {
  if (c == '-') return '_';
  if (c >= 'a' && c <= 'z') return static_cast<char>(c - 'a' + 'A');
  return c;
}

// True when the CGI variable `var` ("HTTP_X_ID") names the HTTP header `name` ("x-id").
bool names_header(std::string_view var, std::string_view name) {
  if (var.size() != name.size()) return false;
  for (std::size_t i = 0; i < var.size(); ++i)
    if (var[i] != header_char(name[i])) return false;
  return true;
}

} // namespace

void Request::clear() {
  if (!owned_.empty()) owned_.clear();
  entries_.clear();
  wire_base_ = nullptr;
  wire_ = nullptr;
  wire_count_ = wire_skip_ = wire_at_ = 0;
  method_ = uri_ = path_ = query_ = {};
  request_id_ = traceparent_ = request_start_ = {};
  id_generated_ = false;
  body_.clear();
  stream_ = nullptr;
  reader_.restart();
  abort_probe_ = nullptr;
  abort_context_ = nullptr;
  loaded_body_.clear();
  body_loaded_ = false;
  query_parsed_ = form_parsed_ = parts_parsed_ = false;
  parts_.clear();
  path_params_.clear();
  decoded_params_.clear();
  route_ = "(handler)";
}

bool Request::release_large_buffers(std::size_t above) {
  bool released = body_.release(above);
  if (loaded_body_.capacity() >= above) {
    std::string().swap(loaded_body_);
    released = true;
  }
  return released;
}

void Request::add_param(std::string_view name, std::string_view value) {
  const std::string& n = owned_.emplace_back(name);
  const std::string& v = owned_.emplace_back(value);
  entries_.push_back({n, v});
}

namespace {

bool lower_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

} // namespace

// W3C Trace Context: version "00" is 55 characters; a later version may append fields after a
// '-'. All-zero ids are invalid.
std::string_view Request::trace_id() const {
  std::string_view tp = trace_parent();
  if (tp.size() < 55 || (tp.size() > 55 && tp[55] != '-') || tp[2] != '-' || tp[35] != '-' ||
      tp[52] != '-' || !lower_hex(tp.substr(0, 2)) || tp.substr(0, 2) == "ff")
    return {};
  std::string_view id = tp.substr(3, 32), parent = tp.substr(36, 16);
  if (!lower_hex(id) || !lower_hex(parent) || !lower_hex(tp.substr(53, 2)) ||
      id.find_first_not_of('0') == std::string_view::npos ||
      parent.find_first_not_of('0') == std::string_view::npos)
    return {};
  return id;
}

std::string_view Request::carried_id() const {
  if (!request_id_.empty()) return request_id_;
  return !traceparent_.empty() ? trace_id() : std::string_view{};
}

std::string_view Request::request_id() const {
  if (std::string_view carried = carried_id(); !carried.empty()) return carried;
  if (!id_format_) return {};
  if (!id_generated_) {
    id_format_(id_context_, generated_id_);
    id_generated_ = true;
  }
  return {generated_id_, sizeof generated_id_};
}

std::string_view Request::param(std::string_view name) const {
  std::optional<Param> p = last_param([name](const Param& e) { return e.name == name; });
  return p ? p->value : std::string_view{};
}

bool Request::has_param(std::string_view name) const {
  return last_param([name](const Param& e) { return e.name == name; }).has_value();
}

Request::Param Request::param_at(std::size_t i) const {
  if (i < wire_at_) return entries_[i];
  if (i - wire_at_ < wire_size()) return wire_param(i - wire_at_);
  return entries_[i - wire_size()];
}

// One pass over the parameters for the seven the host needs on every request (the ids go into the
// scoreboard for each one), each recognised by its length first; the last of a name wins, as in
// param().
void Request::finish_params() {
  CoreParams core;
  for (std::size_t i = 0; i < param_count(); ++i) {
    const Param e = param_at(i);
    std::string_view name = e.name;
    switch (name.size()) {
    case 11:
      if (name == "REQUEST_URI") core.uri = e.value;
      if (name == "SCRIPT_NAME") core.script_name = e.value;
      break;
    case 12:
      if (name == "QUERY_STRING") core.query = e.value;
      break;
    case 14:
      if (name == "REQUEST_METHOD") core.method = e.value;
      break;
    case 16:
      if (name == "HTTP_TRACEPARENT") core.traceparent = e.value;
      break;
    case 17:
      if (name == "HTTP_X_REQUEST_ID") core.request_id = e.value;
      break;
    case 20:
      if (name == "HTTP_X_REQUEST_START") core.request_start = e.value;
      break;
    }
  }
  finish_params(core);
}

void Request::finish_params(const CoreParams& core) {
  method_ = core.method;
  query_ = core.query;
  request_id_ = core.request_id;
  traceparent_ = core.traceparent;
  request_start_ = core.request_start;
  uri_ = core.uri.empty() ? core.script_name : core.uri; // CGI servers without REQUEST_URI
  path_ = uri_.substr(0, uri_.find('?'));
}

std::string_view Request::header(std::string_view name) const {
  if (names_header("CONTENT_TYPE", name) || names_header("CONTENT_LENGTH", name))
    if (auto p = last_param([name](const Param& e) { return names_header(e.name, name); }))
      return p->value;
  auto p = last_param([name](const Param& e) {
    std::string_view var = e.name;
    return var.size() > 5 && var.substr(0, 5) == "HTTP_" && names_header(var.substr(5), name);
  });
  return p ? p->value : std::string_view{};
}

void Request::for_each_header(
    const std::function<void(std::string_view, std::string_view)>& fn) const {
  for (std::size_t i = 0; i < param_count(); ++i) {
    const Param e = param_at(i);
    std::string_view var = e.name;
    if (var.size() > 5 && var.substr(0, 5) == "HTTP_") fn(var, e.value);
  }
}

} // namespace app
