// The handler as a plugin library (also built by the documented one-line g++ command).
#include "app/plugin.hpp"
#include "hello.hpp"

FCGI_HOST_PLUGIN(Hello)
