#pragma once
// `fcgi-host reload --wait`: after asking for the reload, follow the master's status page until
// the reload's rollout has an outcome, so that a deploy script can stop on a build that was
// undone (process_manager/rollout.hpp: promoted, undone).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fcgi_host {

// The status page's rollout rows: the last reload's generation (0: none yet) and its state.
struct RolloutSeen {
  std::uint32_t generation = 0;
  std::string state;
};

// Reads them from a text status page.
RolloutSeen rollout_seen(std::string_view text_page);

// Asks `address` for its status page until a rollout of a generation after `before` is promoted
// (returns true) or undone (false), or `limit` has passed (nullopt). Throws what ask_host throws.
std::optional<bool> wait_for_rollout(const std::string& address, std::uint32_t before,
                                     std::chrono::milliseconds limit);

} // namespace fcgi_host
