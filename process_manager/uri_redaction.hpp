#pragma once
// The URIs the master writes into its log from the scoreboard (a crash block, a request
// timeout, a slow request's stack) have the secrets of their query redacted, as the host's
// crash captures and status page redact them: `?api_token=xxxxxxxx&password=xxxx`. The rule
// is the host's (FastCGI knows which names are secrets; this room does not): it installs it at
// start; until then a URI is shown as it is.
#include <cstddef>

namespace process_manager {

// Redacts uri[0, size) in place, keeping its length; returns how many values it redacted.
using UriRedactor = std::size_t (*)(char* uri, std::size_t size);
void set_uri_redactor(UriRedactor redact);

// The NUL-terminated `uri` (a RequestInfo's) redacted in place by the installed rule.
void redact_shown_uri(char* uri);

} // namespace process_manager
