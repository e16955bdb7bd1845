#include "fcgi_host/cli/reload_wait.hpp"

#include "fcgi_host/observe/status_client.hpp"

#include <charconv>
#include <thread>

namespace fcgi_host {

namespace {

// The value of the line "key:   value" of a text page, empty when there is none.
std::string_view field(std::string_view page, std::string_view key) {
  for (std::size_t at = 0; at < page.size();) {
    std::size_t end = page.find('\n', at);
    if (end == std::string_view::npos) end = page.size();
    std::string_view line = page.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    line.remove_prefix(key.size() + 1);
    while (!line.empty() && line.front() == ' ')
      line.remove_prefix(1);
    return line;
  }
  return {};
}

} // namespace

RolloutSeen rollout_seen(std::string_view text_page) {
  RolloutSeen seen;
  std::string_view g = field(text_page, "rollout generation");
  std::from_chars(g.data(), g.data() + g.size(), seen.generation);
  seen.state = std::string(field(text_page, "rollout state"));
  return seen;
}

std::optional<bool> wait_for_rollout(const std::string& address, std::uint32_t before,
                                     std::chrono::milliseconds limit) {
  // The page is cheap for the master (it reads the scoreboard); a few times a second is enough
  // for a decision taken over a window of seconds.
  constexpr std::chrono::milliseconds kEvery{200};
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    HostReply r = ask_host(address, {"GET", "/status", "", ""}, std::chrono::seconds(5));
    RolloutSeen seen = rollout_seen(r.body);
    if (seen.generation > before && seen.state == "promoted") return true;
    if (seen.generation > before && seen.state == "undone") return false;
    std::this_thread::sleep_for(kEvery);
  }
  return std::nullopt;
}

} // namespace fcgi_host
