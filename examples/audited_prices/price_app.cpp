#include "price_app.hpp"

#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <fstream>
#include <string_view>
#include <unistd.h>

namespace audited_prices {

PriceApp::PriceApp(std::string prices_path, std::string audit_path)
    : prices_path_(std::move(prices_path)), audit_path_(std::move(audit_path)) {
  get("/price/{item}", [this](const app::Request& req, app::Response& res) {
    auto found = prices_.find(req.path_param("item"));
    if (found == prices_.end()) {
      res.status = 404;
      res.set_content("no such item\n", "text/plain");
    } else {
      res.set_content(found->first + ": " + found->second + "\n", "text/plain");
    }
    res.finish(); // the client has its answer; what follows is this worker's time
    audit(req, res.status);
  });
}

// A file that cannot be read keeps the cache as it was (a refresh must not empty it).
void PriceApp::load_prices() {
  std::ifstream in(prices_path_);
  if (!in) return;
  std::map<std::string, std::string, std::less<>> fresh;
  std::string item, price;
  while (in >> item >> price)
    fresh[item] = price;
  prices_.swap(fresh);
  loads_.fetch_add(1, std::memory_order_relaxed);
}

// One line per request: when, what, and the request id that the access log and nginx's carry.
void PriceApp::audit(const app::Request& req, int status) const {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string line =
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) + " " +
      std::string(req.method()) + " " + std::string(req.uri()) + " " + std::to_string(status) +
      " " + std::string(req.request_id()) + "\n";
  const int fd = ::open(audit_path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return;
  [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
  ::close(fd);
}

} // namespace audited_prices
