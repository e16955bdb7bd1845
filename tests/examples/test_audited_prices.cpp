// The audited prices example (examples/audited_prices) through the in-process host: the answer
// comes before the audit record is written (Response::finish()), the record is written after
// it, and an idle worker refreshes the cache from a changed prices file (on_idle()).
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"
#include "price_app.hpp"
#include "support/files.hpp"
#include "support/wait.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string audited_prices_read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

TEST_CASE("audited prices example: answers, audits after the answer, refreshes when idle") {
  test_support::TempDir dir("prices-test");
  const std::string prices = dir.write("prices.txt", "tea 3.50\ncoffee 2.80\n");
  const std::string audit = dir.file("audit.log");
  audited_prices::PriceApp app(prices, audit);
  fcgi_host::InProcessHost host(app);
  auto client = fcgi_test::Client::connect(host.address());

  fcgi_test::Response tea = client.request("GET", "/price/tea");
  CHECK(tea.status == 200);
  CHECK(tea.body == "tea: 3.50\n");
  CHECK(client.request("GET", "/price/cake").status == 404);
  // Each request's record, written after its answer went out.
  REQUIRE(test_wait::wait_until(
      [&] {
        const std::string log = audited_prices_read(audit);
        return log.find("GET /price/tea 200") != std::string::npos &&
               log.find("GET /price/cake 404") != std::string::npos;
      },
      test_wait::Millis{5000}));

  // A changed file reaches the cache once the worker had an idle moment (--idle-work-after:
  // 1 s by default), never on a request's path. (The request also begins a new idle period: the
  // next refresh reads the new file.)
  dir.write("prices.txt", "tea 4.00\n");
  CHECK(client.request("GET", "/price/tea").body == "tea: 3.50\n");
  const unsigned long loads = app.loads();
  REQUIRE(test_wait::wait_until([&] { return app.loads() > loads; }, test_wait::Millis{5000}));
  CHECK(client.request("GET", "/price/tea").body == "tea: 4.00\n");
  CHECK(client.request("GET", "/price/coffee").status == 404);
}
