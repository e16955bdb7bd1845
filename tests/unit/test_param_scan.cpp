// The one pass over the params (param_scan.hpp): every length form and its edges, empty values,
// the limits at exactly their edge, the names and NUL bytes refused, the interpreted params and
// the ids noted, and spans that point where the pairs are.
#include "fcgi_host/protocol/param_scan.hpp"
#include "fcgi_host/protocol/records.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using fcgi_host::ParamProblem;
using fcgi_host::ParamScanLimits;
using fcgi_host::ScannedParams;

namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

std::string encode(const Pairs& pairs) {
  std::string out;
  for (const auto& [n, v] : pairs)
    fcgi_host::records::append_name_value(out, n, v);
  return out;
}

// A length in the 4-byte form, whatever its size.
std::string long_form(std::uint32_t n) {
  std::string out(4, '\0');
  out[0] = static_cast<char>(0x80 | (n >> 24));
  out[1] = static_cast<char>(n >> 16);
  out[2] = static_cast<char>(n >> 8);
  out[3] = static_cast<char>(n);
  return out;
}

constexpr ParamScanLimits kLimits{1000, 1 << 20};

struct Scan {
  std::string bytes;
  ScannedParams params;
  fcgi_host::ParamScanResult result;
  explicit Scan(std::string b, ParamScanLimits limits = kLimits) : bytes(std::move(b)) {
    result = fcgi_host::scan_params(bytes, limits, params);
  }
  ParamProblem problem() const { return result.problem; }
  Pairs pairs() const {
    Pairs out;
    for (std::size_t i = 0; i < params.spans().size(); ++i) {
      auto p = params.pair(bytes.data(), i);
      out.emplace_back(std::string(p.name), std::string(p.value));
    }
    return out;
  }
  std::string noted(std::size_t index) const {
    std::uint32_t at = params.noted[index];
    return at ? std::string(params.pair(bytes.data(), at - 1).value) : "(absent)";
  }
};

} // namespace

TEST_CASE("scan: pairs in the order sent, empty values, as spans into the bytes") {
  Pairs sent{{"REQUEST_METHOD", "GET"}, {"QUERY_STRING", ""}, {"A", ""}, {"A", "2"}, {"B", "x"}};
  Scan s(encode(sent));
  REQUIRE(s.problem() == ParamProblem::None);
  CHECK(s.pairs() == sent);
  CHECK(s.params.size == s.bytes.size());
  CHECK(s.noted(fcgi_host::kRequestMethod) == "GET");
  CHECK(s.noted(fcgi_host::kQueryString) == "");
  CHECK(s.noted(fcgi_host::kRequestUri) == "(absent)");
  CHECK(Scan("").problem() == ParamProblem::None);
  CHECK(Scan("").params.spans().empty());
}

TEST_CASE("scan: the 127/128 edge of the length forms, and the 4-byte form of short lengths") {
  for (std::size_t n : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 127u, 128u, 129u, 65535u, 70000u}) {
    CAPTURE(n);
    Pairs sent{{std::string(n, 'N'), std::string(n - 1, 'v')}, {"AFTER", "x"}};
    Scan s(encode(sent));
    REQUIRE(s.problem() == ParamProblem::None);
    CHECK(s.pairs() == sent);
  }
  // Lengths below 128 may come in the 4-byte form; an empty value too (all its bytes but the
  // high bit zero: NULs that belong to a length, not to a value).
  Scan four(long_form(1) + long_form(0) + "K" + std::string("\x01\x02", 2) + "Lvv");
  REQUIRE(four.problem() == ParamProblem::None);
  CHECK(four.pairs() == Pairs{{"K", ""}, {"L", "vv"}});
  // The largest length the form holds, with nothing behind it: cut short, not a crash.
  CHECK(Scan("\x01" + long_form(0x7fffffff) + "A").problem() == ParamProblem::Truncated);
}

TEST_CASE("scan: each length of a pair in its own form: one byte and four, four and one") {
  // Both one byte is read in one step; one of them in the 4-byte form is not.
  const Pairs sent{{"N", std::string(200, 'v')},
                   {std::string(130, 'M'), "w"},
                   {"O", ""},
                   {std::string(128, 'P'), std::string(128, 'x')}};
  Scan s(encode(sent));
  REQUIRE(s.problem() == ParamProblem::None);
  CHECK(s.pairs() == sent);
  // A one-byte name length, then a 4-byte value length cut short.
  CHECK(Scan(std::string("\x01\x80\x00", 3)).problem() == ParamProblem::Truncated);
}

TEST_CASE("scan: lengths cut short or running past the params are Truncated") {
  for (std::string bad :
       {std::string("\x05", 1), std::string("\x80\x00", 2), std::string("\x01\x80\x00\x00", 4),
        std::string("\x04\x01"
                    "ABC",
                    5),
        std::string("\x01\x05"
                    "Avvvv",
                    7),
        std::string("\x01\x01"
                    "AB\x01",
                    5)}) {
    CAPTURE(bad.size());
    CHECK(Scan(bad).problem() == ParamProblem::Truncated);
  }
  // Exactly the bytes sent: whole.
  CHECK(Scan(std::string("\x01\x04"
                         "Avvvv",
                         7))
            .problem() == ParamProblem::None);
}

TEST_CASE("scan: --max-params at exactly its edge") {
  Pairs three{{"A", "1"}, {"B", "2"}, {"C", "3"}};
  CHECK(Scan(encode(three), {3, 100}).problem() == ParamProblem::None);
  CHECK(Scan(encode(three), {2, 100}).problem() == ParamProblem::TooMany);
  // A cut pair after the limit is still Truncated only once it is reached: the count comes
  // first for a whole pair, as the old guard's walk did.
  CHECK(Scan(encode(three) + "\x05", {3, 100}).problem() == ParamProblem::Truncated);
}

TEST_CASE("scan: names empty or holding NUL or '=', values holding NUL") {
  for (std::string name :
       {std::string(""), std::string("A=B"), std::string("="), std::string("ABCDEFGH="),
        std::string("=ABCDEFGHIJKLMNOP"), std::string("ABCDEFGHIJKLMNO=Q"), std::string("A\0B", 3),
        std::string("ABCDEFGHIJ\0", 11)}) {
    CAPTURE(name);
    Scan s(encode({{"OK", "1"}, {name, "x"}}));
    CHECK(s.problem() == ParamProblem::BadName);
    CHECK(s.result.pair.name == name);
  }
  for (std::string value :
       {std::string("\0", 1), std::string("x\0y", 3), std::string(200, 'v') + '\0'}) {
    Scan s(encode({{"OK", ""}, {"V", value}}));
    CHECK(s.problem() == ParamProblem::NulInValue);
    CHECK(s.result.pair.name == "V");
  }
  // '=' in a value is fine, NUL in a length is fine.
  Scan fine(encode({{"Q", "a=1&b=2"}, {"E", ""}, {"L", std::string(300, 'x')}}));
  CHECK(fine.problem() == ParamProblem::None);
  // The first fault in the order sent decides.
  Scan first(encode({{"V", std::string("\0", 1)}, {"A=B", "x"}}));
  CHECK(first.problem() == ParamProblem::NulInValue);
}

TEST_CASE("scan: an interpreted param twice: one value noted once, two values refused") {
  Scan same(encode({{"REQUEST_METHOD", "GET"}, {"X", "1"}, {"REQUEST_METHOD", "GET"}}));
  CHECK(same.problem() == ParamProblem::None);
  CHECK(same.params.repeated);
  CHECK(same.params.noted[fcgi_host::kRequestMethod] == 1);
  // Every pair as sent (as libfcgi reads them); the handler is given the repeat once.
  CHECK(same.params.spans().size() == 3);
  REQUIRE(same.params.served().size() == 2);
  CHECK(same.params.served()[1].name_size == 1); // "X"
  CHECK(same.params.served_content_length() == 0);
  Scan length(encode({{"CONTENT_TYPE", "a/b"}, {"CONTENT_TYPE", "a/b"}, {"CONTENT_LENGTH", "3"}}));
  CHECK(length.params.noted[fcgi_host::kContentLength] == 3);
  CHECK(length.params.served_content_length() == 2); // 1 + its index once the repeat is out
  Scan two(encode({{"REQUEST_URI", "/a"}, {"REQUEST_URI", "/b"}}));
  CHECK(two.problem() == ParamProblem::TwoValues);
  CHECK(two.result.earlier == "/a");
  CHECK(two.result.pair.value == "/b");
  Scan empty_then_value(encode({{"CONTENT_TYPE", ""}, {"CONTENT_TYPE", "text/plain"}}));
  CHECK(empty_then_value.problem() == ParamProblem::TwoValues);
  // The ids are headers: they may repeat, and the last value is noted.
  Scan ids(encode({{"HTTP_X_REQUEST_ID", "a"},
                   {"HTTP_TRACEPARENT", "t1"},
                   {"HTTP_X_REQUEST_ID", "b"},
                   {"HTTP_TRACEPARENT", "t2"}}));
  CHECK(ids.problem() == ParamProblem::None);
  CHECK_FALSE(ids.params.repeated);
  CHECK(ids.noted(fcgi_host::kRequestId) == "b");
  CHECK(ids.noted(fcgi_host::kTraceParent) == "t2");
}

TEST_CASE("scan: CONTENT_LENGTH empty, -1, a number, at --max-body, above it, not a number") {
  struct Case {
    std::string value;
    ParamProblem problem;
    long long length;
  };
  for (const Case& c :
       {Case{"", ParamProblem::None, -1}, Case{"-1", ParamProblem::None, -1},
        Case{"0", ParamProblem::None, 0}, Case{"100", ParamProblem::None, 100},
        Case{"101", ParamProblem::OverMaxBody, 101},
        Case{"000000000000000100", ParamProblem::None, 100},
        Case{"0000000000000000100", ParamProblem::NotANumber, -1},
        Case{"999999999999999999", ParamProblem::OverMaxBody, 999999999999999999},
        Case{"12x", ParamProblem::NotANumber, -1}, Case{"-2", ParamProblem::NotANumber, -1},
        Case{" 1", ParamProblem::NotANumber, -1}}) {
    CAPTURE(c.value);
    Scan s(encode({{"CONTENT_LENGTH", c.value}}), {10, 100});
    CHECK(s.problem() == c.problem);
    CHECK(s.params.content_length == c.length);
  }
}

TEST_CASE("scan: reuses its vector and starts clean") {
  ScannedParams params;
  std::string a = encode({{"REQUEST_METHOD", "GET"}, {"B", "2"}, {"CONTENT_LENGTH", "5"}});
  REQUIRE(fcgi_host::scan_params(a, kLimits, params).problem == ParamProblem::None);
  const auto* spans = params.spans().data();
  std::string b = encode({{"C", "3"}});
  REQUIRE(fcgi_host::scan_params(b, kLimits, params).problem == ParamProblem::None);
  CHECK(params.spans().data() == spans);
  CHECK(params.spans().size() == 1);
  CHECK(params.noted[fcgi_host::kRequestMethod] == 0);
  CHECK(params.content_length == -1);
}

TEST_CASE("noted_param_index knows each noted name and nothing near it") {
  using fcgi_host::kNotedParams;
  using fcgi_host::kNotNoted;
  using fcgi_host::noted_param_index;
  for (std::size_t i = 0; i < kNotedParams.size(); ++i) {
    CHECK(noted_param_index(kNotedParams[i]) == i);
    std::string name(kNotedParams[i]);
    for (std::size_t at = 0; at < name.size(); ++at) {
      std::string near = name;
      near[at] = near[at] == 'X' ? 'Y' : 'X';
      CHECK_MESSAGE(noted_param_index(near) == kNotNoted, near);
    }
  }
  for (std::string_view other : {"HTTP_TRACEPARENTS", "HTTP_X_REQUEST_I", "X", ""})
    CHECK(noted_param_index(other) == kNotNoted);
}
