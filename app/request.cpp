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
  method_ = uri_ = path_ = query_ = {};
  body_.clear();
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

const Request::Param* Request::find(std::string_view name) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (it->name == name) return &*it;
  return nullptr;
}

std::string_view Request::param(std::string_view name) const {
  const Param* e = find(name);
  return e ? e->value : std::string_view{};
}

bool Request::has_param(std::string_view name) const {
  return find(name) != nullptr;
}

Request::Param Request::param_at(std::size_t i) const {
  return entries_[i];
}

void Request::finish_params() {
  // One pass from the end (the last of a repeated name wins, as in param()).
  bool method = false, query = false, uri = false, script = false;
  std::string_view script_name;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    std::string_view n = it->name;
    if (n.size() == 14 && !method && n == "REQUEST_METHOD") {
      method_ = it->value, method = true;
    } else if (n.size() == 12 && !query && n == "QUERY_STRING") {
      query_ = it->value, query = true;
    } else if (n.size() == 11 && !uri && n == "REQUEST_URI") {
      uri_ = it->value, uri = true;
    } else if (n.size() == 11 && !script && n == "SCRIPT_NAME") {
      script_name = it->value, script = true;
    }
  }
  if (uri_.empty()) uri_ = script_name; // CGI servers without REQUEST_URI
  path_ = uri_.substr(0, uri_.find('?'));
}

std::string_view Request::header(std::string_view name) const {
  if (names_header("CONTENT_TYPE", name) || names_header("CONTENT_LENGTH", name))
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
      if (names_header(it->name, name)) return it->value;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    std::string_view var = it->name;
    if (var.size() > 5 && var.substr(0, 5) == "HTTP_" && names_header(var.substr(5), name))
      return it->value;
  }
  return {};
}

void Request::for_each_header(
    const std::function<void(std::string_view, std::string_view)>& fn) const {
  for (const Param& e : entries_) {
    std::string_view var = e.name;
    if (var.size() > 5 && var.substr(0, 5) == "HTTP_") fn(var, e.value);
  }
}

} // namespace app
