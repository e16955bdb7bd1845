// The audited prices example as a plugin:
//   fcgi-host --app ./libaudited_prices.so --env PRICES=/etc/prices.txt
//             --env AUDIT_LOG=/var/log/prices/audit.log
// (the workers see only the --env variables unless --clear-env off). The audit file's directory
// must be writable by the workers' user.
#include "app/plugin.hpp"
#include "price_app.hpp"

#include <cstdlib>
#include <string>

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

class PricePlugin : public audited_prices::PriceApp {
public:
  PricePlugin() : PriceApp(env_or("PRICES", "prices.txt"), env_or("AUDIT_LOG", "audit.log")) {}
};

} // namespace

FCGI_HOST_PLUGIN(PricePlugin)
