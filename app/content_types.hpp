#pragma once
// The media type of a file by its extension, for Response::send_file(): a small table of the
// types a web application serves, "application/octet-stream" for any other.
#include <string_view>

namespace app {

// "text/html; charset=utf-8" for "/srv/a/index.html"; the extension compares case-insensitively.
std::string_view content_type_for(std::string_view path);

} // namespace app
