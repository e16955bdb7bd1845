// The notes example (examples/notes) through the in-process host: the real worker loop and
// the raw FastCGI client, on a real SQLite file in a temporary directory.
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"
#include "notes_app.hpp"
#include "support/files.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

const fcgi_test::Params kJson = {{"CONTENT_TYPE", "application/json"}};

nlohmann::json json_of(const fcgi_test::Response& r) {
  return nlohmann::json::parse(r.body);
}

} // namespace

TEST_CASE("notes example: create, list, get, update, delete") {
  test_support::TempDir dir("notes-test");
  notes::NotesApp app(dir.file("notes.db"));
  fcgi_host::InProcessHost host(app);
  auto client = fcgi_test::Client::connect(host.address());

  CHECK(client.request("GET", "/notes").body == "[]");

  fcgi_test::Response created =
      client.request("POST", "/notes", R"({"title":"first","body":"hello"})", kJson);
  REQUIRE(created.status == 201);
  CHECK(created.header("Content-Type") == std::optional<std::string>("application/json"));
  nlohmann::json note = json_of(created);
  CHECK(note["title"] == "first");
  CHECK(note["body"] == "hello");
  std::string location = "/notes/" + std::to_string(note["id"].get<long>());
  CHECK(created.header("Location") == location);
  client.request("POST", "/notes", R"({"title":"second"})", kJson);

  nlohmann::json list = json_of(client.request("GET", "/notes"));
  REQUIRE(list.size() == 2);
  CHECK(list[0]["title"] == "second"); // newest first
  CHECK(json_of(client.request("GET", "/notes?limit=1")).size() == 1);
  CHECK(json_of(client.request("GET", "/notes?limit=1&offset=1"))[0]["title"] == "first");

  CHECK(json_of(client.request("GET", location))["body"] == "hello");
  fcgi_test::Response updated =
      client.request("PUT", location, R"({"title":"first, edited","body":"b"})", kJson);
  CHECK(updated.status == 200);
  CHECK(json_of(client.request("GET", location))["title"] == "first, edited");

  fcgi_test::Response head = client.request("HEAD", location);
  CHECK(head.status == 200);
  CHECK(head.body.empty());

  CHECK(client.request("DELETE", location).status == 204);
  CHECK(client.request("GET", location).status == 404);
  CHECK(client.request("DELETE", location).status == 404);
  CHECK(json_of(client.request("GET", "/notes")).size() == 1);
}

TEST_CASE("notes example: validation errors are 400, 415 and 422 in JSON") {
  test_support::TempDir dir("notes-test");
  notes::NotesApp app(dir.file("notes.db"));
  fcgi_host::InProcessHost host(app);
  auto client = fcgi_test::Client::connect(host.address());

  auto error_of = [&](const fcgi_test::Response& r) {
    return json_of(r)["error"].get<std::string>();
  };
  fcgi_test::Response bad_json = client.request("POST", "/notes", "{oops", kJson);
  CHECK(bad_json.status == 400);
  CHECK(error_of(bad_json) == "the body is not valid JSON");
  CHECK(client.request("POST", "/notes", "title=x").status == 415);
  CHECK(client.request("POST", "/notes", "[1,2]", kJson).status == 422);
  CHECK(client.request("POST", "/notes", R"({"body":"no title"})", kJson).status == 422);
  CHECK(client.request("POST", "/notes", R"({"title":""})", kJson).status == 422);
  CHECK(client.request("POST", "/notes", R"({"title":5})", kJson).status == 422);
  std::string long_title = R"({"title":")" + std::string(201, 't') + R"("})";
  CHECK(client.request("POST", "/notes", long_title, kJson).status == 422);
  CHECK(client.request("POST", "/notes", R"({"title":"t","body":[]})", kJson).status == 422);
  CHECK(client.request("GET", "/notes?limit=0").status == 400);
  CHECK(client.request("GET", "/notes?limit=abc").status == 400);
  CHECK(client.request("PUT", "/notes/1", R"({"title":"none"})", kJson).status == 404);

  fcgi_test::Response not_a_number = client.request("GET", "/notes/abc");
  CHECK(not_a_number.status == 404);
  CHECK(error_of(not_a_number) == "not found");
  fcgi_test::Response wrong_method = client.request("PATCH", "/notes/1");
  CHECK(wrong_method.status == 405);
  CHECK(wrong_method.header("Allow") == std::optional<std::string>("GET, PUT, DELETE, HEAD"));
  CHECK(json_of(client.request("GET", "/notes")).empty()); // nothing was written
}

TEST_CASE("notes example: the data outlives the worker (a real SQLite file)") {
  test_support::TempDir dir("notes-test");
  std::string db = dir.file("notes.db");
  {
    notes::NotesApp app(db);
    fcgi_host::InProcessHost host(app);
    auto client = fcgi_test::Client::connect(host.address());
    REQUIRE(client.request("POST", "/notes", R"({"title":"kept"})", kJson).status == 201);
  }
  notes::NotesApp app(db);
  fcgi_host::InProcessHost host(app);
  auto client = fcgi_test::Client::connect(host.address());
  nlohmann::json list = json_of(client.request("GET", "/notes"));
  REQUIRE(list.size() == 1);
  CHECK(list[0]["title"] == "kept");
}
