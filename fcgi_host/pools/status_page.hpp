#pragma once
// The status page of the master of several pools: each pool's own page (asked of its master's
// status socket, in the format the client asked for) put together.
//   JSON          {"pools":{"api":{...},"php":{...}}}; a pool that did not answer is null
//   OpenMetrics,  every series of every pool with a pool="NAME" label first, each family's
//   Prometheus    HELP and TYPE once, its samples of all pools together, one # EOF at the end
//   text, HTML    each pool's page under a "[NAME]" line
#include "fcgi_host/observe/status_client.hpp"
#include "fcgi_host/observe/status_page.hpp"

#include <optional>
#include <string>
#include <vector>

namespace fcgi_host {

struct PoolPage {
  std::string name;
  std::optional<HostReply> reply; // empty: the pool did not answer
  std::string error;              // why, then
};

EndpointReply merge_pool_pages(const std::vector<PoolPage>& pages);

// "name{a="b"} 1" -> "name{pool="P",a="b"} 1"; "name 1" -> "name{pool="P"} 1".
std::string label_sample(std::string_view line, std::string_view pool);

} // namespace fcgi_host
