#include "process_manager/uri_redaction.hpp"

#include <atomic>
#include <cstring>

namespace process_manager {
namespace {

std::atomic<UriRedactor> g_redact{nullptr};

} // namespace

void set_uri_redactor(UriRedactor redact) {
  g_redact.store(redact, std::memory_order_release);
}

void redact_shown_uri(char* uri) {
  if (UriRedactor redact = g_redact.load(std::memory_order_acquire)) redact(uri, std::strlen(uri));
}

} // namespace process_manager
