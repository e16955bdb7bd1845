#include "fcgi_host/pools/status_page.hpp"

#include <map>
#include <sstream>

namespace fcgi_host {
namespace {

bool is_metrics(const std::string& content_type) {
  return content_type.find("openmetrics") != std::string::npos ||
         content_type.find("version=0.0.4") != std::string::npos;
}

// The family a comment line names: "# TYPE fcgihost_up gauge" -> "fcgihost_up".
std::string comment_family(std::string_view line) {
  std::istringstream words{std::string(line)};
  std::string hash, kind, name;
  words >> hash >> kind >> name;
  return name;
}

struct Family {
  std::string described_by;          // the pool whose HELP, TYPE and UNIT lines are kept
  std::vector<std::string> comments; // those lines, once
  std::vector<std::string> samples;  // of every pool
};

std::string merge_metrics(const std::vector<PoolPage>& pages, bool& eof) {
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  for (const PoolPage& page : pages) {
    if (!page.reply) continue;
    std::istringstream in(page.reply->body);
    std::string current;
    for (std::string line; std::getline(in, line);) {
      if (line == "# EOF") {
        eof = true;
        continue;
      }
      if (line.starts_with("#")) {
        current = comment_family(line);
        auto [it, fresh] = families.try_emplace(current);
        if (fresh) order.push_back(current);
        Family& f = it->second;
        if (f.described_by.empty()) f.described_by = page.name;
        if (f.described_by == page.name) f.comments.push_back(line);
        continue;
      }
      if (line.empty()) continue;
      auto [it, fresh] = families.try_emplace(current);
      if (fresh) order.push_back(current);
      it->second.samples.push_back(label_sample(line, page.name));
    }
  }
  std::string out;
  for (const std::string& name : order) {
    for (const std::string& c : families[name].comments)
      out += c + "\n";
    for (const std::string& s : families[name].samples)
      out += s + "\n";
  }
  return out;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

} // namespace

std::string label_sample(std::string_view line, std::string_view pool) {
  const std::string label = "pool=" + json_string(pool);
  const std::size_t brace = line.find('{'), space = line.find(' ');
  if (brace != std::string_view::npos && brace < space) {
    const bool empty = brace + 1 < line.size() && line[brace + 1] == '}';
    return std::string(line.substr(0, brace + 1)) + label + (empty ? "" : ",") +
           std::string(line.substr(brace + 1));
  }
  if (space == std::string_view::npos) return std::string(line);
  return std::string(line.substr(0, space)) + "{" + label + "}" + std::string(line.substr(space));
}

EndpointReply merge_pool_pages(const std::vector<PoolPage>& pages) {
  std::string content_type = "text/plain";
  for (const PoolPage& p : pages)
    if (p.reply && !p.reply->content_type.empty()) content_type = p.reply->content_type;
  EndpointReply r = plain_reply(200, "");
  r.content_type = content_type;
  if (content_type.starts_with("application/json")) {
    r.body = "{\"pools\":{";
    for (std::size_t i = 0; i < pages.size(); ++i) // appends: a false -Wrestrict of GCC 12
      r.body.append(i ? "," : "")
          .append(json_string(pages[i].name))
          .append(":")
          .append(pages[i].reply ? pages[i].reply->body : "null");
    r.body += "}}\n";
  } else if (is_metrics(content_type)) {
    bool eof = false;
    r.body = merge_metrics(pages, eof);
    if (eof) r.body += "# EOF\n";
  } else {
    for (const PoolPage& p : pages)
      r.body +=
          "[" + p.name + "]\n" + (p.reply ? p.reply->body : "no answer: " + p.error + "\n") + "\n";
  }
  return r;
}

} // namespace fcgi_host
