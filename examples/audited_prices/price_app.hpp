#pragma once
// Work the client does not wait for, in a small price lookup:
//
//   GET /price/{item}   "item: price" from a cache of the prices file, 404 for an unknown item;
//                       the response is finished (Response::finish()) before the handler writes
//                       its audit record, so the client never waits for the audit file's disk.
//
// on_idle() refreshes the cache from the prices file (one "item price" pair a line) when the
// worker has had nothing to do for a while (--idle-work-after): the file's reading is never on a
// request's path, and a changed file reaches every worker once each had an idle moment.
//
// Each worker (each thread, with --threads: FCGI_HOST_PLUGIN makes an instance per thread) has
// its own cache; audit records are appended whole, one line each, so that workers writing at
// once never interleave inside a line (O_APPEND, one write per record).
#include "app/router.hpp"

#include <atomic>
#include <map>
#include <string>

namespace audited_prices {

class PriceApp : public app::Router {
public:
  PriceApp(std::string prices_path, std::string audit_path);

  void on_worker_start() override { load_prices(); }
  void on_thread_start() override { load_prices(); }
  void on_idle() override { load_prices(); }

  // Times the cache was loaded (for tests: the refresh happened).
  unsigned long loads() const { return loads_.load(std::memory_order_relaxed); }

private:
  void load_prices();
  void audit(const app::Request& request, int status) const;

  std::string prices_path_;
  std::string audit_path_;
  std::map<std::string, std::string, std::less<>> prices_;
  std::atomic<unsigned long> loads_{0};
};

} // namespace audited_prices
