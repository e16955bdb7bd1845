// The handler in the real worker loop, in-process, asked by the raw FastCGI test client: the
// include lines are the ones docs/plugins.md gives, in the build tree and installed.
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"
#include "hello.hpp"

#include <iostream>

int main() {
  Hello handler;
  fcgi_host::InProcessHost host(handler);
  auto client = fcgi_test::Client::connect(host.address());
  fcgi_test::Response r = client.request("GET", "/hello/world");
  if (r.status != 200 || r.body != "hello world\n") {
    std::cerr << "unexpected answer " << r.status << ": " << r.body << "\n";
    return 1;
  }
  std::cout << "consumer: " << r.body;
  return 0;
}
