// The handler API's parsers on hostile input: the first byte picks one, the rest is its input.
//   0  query / form args (app::Args) and percent-decoding
//   1  the Cookie header
//   2  multipart/form-data: the body fed whole and in chunks (sizes from the input) must give the
//      same parts, with a small spill threshold so that spilled parts are exercised too
//   3  the Router: the input is a path dispatched over a fixed set of patterns
// Invariants that fail abort, so libFuzzer keeps the input.
#include "app/args.hpp"
#include "app/cookies.hpp"
#include "app/multipart.hpp"
#include "app/router.hpp"
#include "app/url_encoding.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);            \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

namespace {

void fuzz_args(std::string_view text) {
  app::Args args;
  args.parse(text);
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    bytes += args.at(i).name.size() + args.at(i).value.size();
    FUZZ_CHECK(args.get_all(args.at(i).name).size() >= 1);
  }
  FUZZ_CHECK(bytes <= text.size()); // decoding never grows
  std::string decoded = app::percent_decode(text, true);
  FUZZ_CHECK(decoded.size() <= text.size());
  FUZZ_CHECK(app::percent_decode(app::percent_encode(text)) == text); // round trip
}

void fuzz_cookies(std::string_view header) {
  std::size_t count = 0;
  app::for_each_cookie(header, [&](std::string_view name, std::string_view value) {
    FUZZ_CHECK(!name.empty());
    FUZZ_CHECK(name.data() >= header.data() &&
               value.data() + value.size() <= header.data() + header.size());
    FUZZ_CHECK(app::find_cookie(header, name).has_value());
    ++count;
  });
  FUZZ_CHECK(count <= header.size() / 2 + 1);
}

struct Parsed {
  bool ok = false;
  std::vector<std::string> fields;
};

Parsed parse_multipart(std::string_view body, std::string_view cuts) {
  app::MultipartLimits limits;
  limits.spill_threshold = 64;
  limits.max_parts = 50;
  limits.max_header_bytes = 512;
  app::MultipartParser parser("b0", limits);
  std::size_t ci = 0;
  bool fed = true;
  while (!body.empty() && fed) {
    std::size_t n =
        cuts.empty() ? body.size() : 1 + static_cast<unsigned char>(cuts[ci++ % cuts.size()]) % 64;
    n = std::min(n, body.size());
    fed = parser.feed(body.data(), n);
    body.remove_prefix(n);
  }
  Parsed p;
  p.ok = fed && parser.finish();
  if (p.ok)
    for (app::MultipartPart& part : parser.parts()) {
      FUZZ_CHECK(part.data.spilled() == (part.data.size() > 64));
      p.fields.push_back(part.name + '\0' + part.filename + '\0' + part.data.contents());
    }
  return p;
}

void fuzz_multipart(std::string_view input) {
  // The first 8 bytes give the chunk sizes, the rest is the body.
  std::string_view cuts = input.substr(0, std::min<std::size_t>(8, input.size()));
  std::string_view body = input.substr(cuts.size());
  Parsed whole = parse_multipart(body, {});
  Parsed chunked = parse_multipart(body, cuts.empty() ? std::string_view("\x01") : cuts);
  FUZZ_CHECK(whole.ok == chunked.ok);
  FUZZ_CHECK(whole.fields == chunked.fields);
}

void fuzz_router(std::string_view path) {
  static app::Router* r = [] {
    auto* made = new app::Router; // one for the whole run
    auto ok = [](const app::Request& req, app::Response& res) {
      for (std::string_view name : {"id", "name", "path", "c"})
        res.body.append(req.path_param(name));
    };
    made->get("/", ok).get("/a/{id:int}", ok).get("/a/{name}", ok).get("/a/new", ok);
    made->get("/f/{path*}", ok).any("/s/*", ok).post("/a/{id}/b/{c:slug}", ok);
    return made;
  }();
  for (const char* method : {"GET", "HEAD", "POST"}) {
    app::Request req;
    req.add_param("REQUEST_METHOD", method);
    req.add_param("REQUEST_URI", path);
    req.finish_params();
    app::Response res;
    r->handle(req, res);
    FUZZ_CHECK(res.status == 200 || res.status == 404 || res.status == 405);
    FUZZ_CHECK(res.body.size() <= path.size() + 20);
    FUZZ_CHECK(!req.route().empty());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
  case 0:
    fuzz_args(input);
    break;
  case 1:
    fuzz_cookies(input);
    break;
  case 2:
    fuzz_multipart(input);
    break;
  case 3:
    fuzz_router(input);
    break;
  }
  return 0;
}
