# The rooms' floors hold: an include never climbs from a lower room into a higher one
# (docs/architecture.md, "Rooms"). Each rule: the files it covers, the include they may not have.
#   cmake -DSOURCE_DIR=<project root> -P check_layers.cmake
#
# - Only cli/ knows Config and the command line; every other room takes a narrow settings struct
#   of its own (cli/settings_from_config.cpp makes them; the pools' supervisor takes PoolSpecs,
#   made by cli/plan_pools.cpp).
# - pools/ (the master of several pools) sits just under cli/: only cli/ includes it.
# - The worker's side of process_manager is worker_context.hpp: a worker, a runner and the
#   spawner never see the Master.
# - observe/ (metrics, status, logs) serves the worker and the master: it includes neither.
# - protocol/ (the wire) reads net/ (socket writes, connect) and config/ only; net/ reads config/.
# - sandbox/ (Landlock, seccomp, the private /tmp) serves worker/, runners/ and cli/: it reads
#   config/ and process_manager/ only, and nothing reaches it by its old worker/ path.
# - The ground room config/ (the option table, the version, the limits) includes no other.
# - The handler API (app/) knows no host. The example programs, which include the host, live
#   outside every room (examples/), and no room includes them.
set(rules
    "fcgi_host/(config|protocol|net|observe|worker|sandbox|runners|testing|pools)/|fcgi_host/run\\.hpp|app/|process_manager/"
    "#include \"fcgi_host/cli/"
    "fcgi_host/(config|protocol|net|observe|worker|sandbox|runners|testing)/|fcgi_host/run\\.hpp|app/|process_manager/"
    "#include \"fcgi_host/pools/"
    "fcgi_host/(worker|runners)/|process_manager/spawner\\."
    "#include \"process_manager/master\\.hpp\""
    "fcgi_host/protocol/"
    "#include \"fcgi_host/(cli|pools|runners|worker|sandbox|observe)/"
    "fcgi_host/net/"
    "#include \"fcgi_host/(cli|pools|runners|worker|sandbox|observe|protocol)/"
    "fcgi_host/config/"
    "#include \"(fcgi_host/(cli|protocol|net|observe|worker|sandbox|runners|testing)|process_manager|app)/"
    "fcgi_host/observe/"
    "#include \"fcgi_host/(worker|sandbox|runners|cli)/"
    "fcgi_host/sandbox/"
    "#include \"fcgi_host/(cli|pools|runners|worker|observe|protocol|net|testing)/"
    "fcgi_host/|app/|process_manager/"
    "#include \"fcgi_host/worker/(sandbox|private_tmp)"
    "app/"
    "#include \"(fcgi_host|process_manager)/"
    "fcgi_host/|app/|process_manager/"
    "#include \"examples/")
file(GLOB_RECURSE sources RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/fcgi_host/*.hpp"
     "${SOURCE_DIR}/fcgi_host/*.cpp" "${SOURCE_DIR}/app/*.hpp" "${SOURCE_DIR}/app/*.cpp"
     "${SOURCE_DIR}/process_manager/*.hpp" "${SOURCE_DIR}/process_manager/*.cpp")
set(broken "")
list(LENGTH rules n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET rules ${i} covered)
  list(GET rules ${j} forbidden)
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "^(${covered})")
      continue()
    endif()
    file(STRINGS "${SOURCE_DIR}/${source}" lines REGEX "^#include \"")
    foreach(line IN LISTS lines)
      if(line MATCHES "${forbidden}")
        string(APPEND broken "  ${source}: ${line}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(broken)
  message(FATAL_ERROR "includes that climb into a higher room:\n${broken}")
endif()
