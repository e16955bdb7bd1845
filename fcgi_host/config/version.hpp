#pragma once
namespace fcgi_host {
inline constexpr const char* kVersion = "0.1.0";
}
