#!/usr/bin/env bash
# Package test: build the .deb from a Release build, check it with lintian (no error, no
# warning), install it, serve through Debian's own nginx (the packaged `nginx` service, the site
# snippet from the package enabled on a private loopback port) to the packaged fcgi-host service,
# build a handler plugin and a program with its own main out of tree against the installed
# package (find_package(fcgi_host)), serve a request with each, then purge the package and check
# that nothing is left (user, config, logs, processes).
#
#   sudo scripts/package-test.sh            (root: it installs and removes a system package)
#   scripts/package-test.sh --build-only    the Release build into PACKAGE_BUILD_DIR, nothing
#                                           else (scripts/test.sh runs it beside its tests, then
#                                           the test proper on that build)
#
# Environment:
#   PACKAGE_BUILD_DIR  build directory (default: a fresh one in the temp dir, removed at the
#                      end; name one to keep it between runs of the same checkout)
#   KEEP_PACKAGE=1     leave the package installed at the end
#
# Safe for CI (fresh Debian 12, root): it refuses to run if fcgi-host is already installed (it
# would remove someone's package), every wait is bounded, and everything it starts or creates is
# stopped and removed on exit, failure included.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_ONLY=0
[[ "${1:-}" == --build-only ]] && BUILD_ONLY=1
WORK=$(mktemp -d /tmp/fcgi-host-package-test.XXXXXX)
# A fresh build each run by default: a kept build dir may come from another checkout.
BUILD=${PACKAGE_BUILD_DIR:-$WORK/build}
PIDS=()
INSTALLED=0
NGINX_SITE=/etc/nginx/sites-enabled/fcgi-host-package-test
NGINX_DEFAULT_MOVED=0
NGINX_WAS_RUNNING=0
NGINX_TOUCHED=0
MASTER=""
START=$SECONDS

step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - START)); }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}

cleanup() {
    local rc=$?
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    restore_nginx
    stop_service
    if [ "$INSTALLED" = 1 ] && [ "${KEEP_PACKAGE:-0}" != 1 ]; then
        apt-get purge -y -q fcgi-host >/dev/null 2>&1 || dpkg --purge fcgi-host >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
    if [ "$BUILD_ONLY" = 1 ]; then
        [ $rc -eq 0 ] || printf '\npackage build: FAIL (exit %d, %ds)\n' $rc $((SECONDS - START)) >&2
    elif [ $rc -eq 0 ]; then
        printf '\npackage test: PASS (%ds)\n' $((SECONDS - START))
    else
        printf '\npackage test: FAIL (exit %d, %ds)\n' $rc $((SECONDS - START)) >&2
    fi
}
# Debian's nginx service back as it was: our site removed, the default site back, stopped unless
# it ran before.
restore_nginx() {
    [ "$NGINX_TOUCHED" = 1 ] || return 0
    NGINX_TOUCHED=0
    rm -f "$NGINX_SITE"
    if [ "$NGINX_DEFAULT_MOVED" = 1 ]; then
        mv "$WORK/nginx-default-site" /etc/nginx/sites-enabled/default
    fi
    if [ "$NGINX_WAS_RUNNING" = 1 ]; then
        service nginx reload >/dev/null 2>&1 || true
    else
        service nginx stop >/dev/null 2>&1 || true
    fi
}
# The packaged service, stopped the way it was started (policy-rc.d may keep the maintainer
# scripts from doing it); TERM to its master as a last resort.
stop_service() {
    [ -n "$MASTER" ] || return 0
    service fcgi-host stop >/dev/null 2>&1 || true
    for _ in $(seq 100); do kill -0 "$MASTER" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$MASTER" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$MASTER" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$MASTER" 2>/dev/null && return 1
    MASTER=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- The Release build of what the package ships, and nothing else: no tests, examples or
# benchmark programs. Warm when scripts/test.sh built it beside its tests.
build_release() {
    step "Release build in $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
        -DFCGI_HOST_TESTS=OFF -DFCGI_HOST_EXAMPLES=OFF -DFCGI_HOST_BENCH=OFF -DFCGI_HOST_DEB=ON >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" -- --no-print-directory >"$WORK/build.log" 2>&1 ||
        { cat "$WORK/build.log"; fail "build"; }
    if grep -q 'warning:' "$WORK/build.log"; then
        echo "build warnings:"
        grep -A3 'warning:' "$WORK/build.log" | awk 'NR <= 40'
    fi
}
if [ "$BUILD_ONLY" = 1 ]; then
    [ -n "${PACKAGE_BUILD_DIR:-}" ] || fail "--build-only needs PACKAGE_BUILD_DIR (the default is removed at the end)"
    build_release
    exit 0
fi

[ "$(id -u)" = 0 ] || fail "run as root (the test installs and removes the fcgi-host package)"
if dpkg-query -W -f='${Status}' fcgi-host 2>/dev/null | grep -q 'install ok installed'; then
    fail "fcgi-host is already installed; remove it first (this test would remove it at the end)"
fi

# ---- What the build and the test need (Debian packages only) ----------------------------------
step "build dependencies"
# (scripts/debian-packages.txt: the groups build, demo and package)
source "$ROOT/scripts/debian-packages.sh"
install_debian_packages build demo package

# ---- Build the package ------------------------------------------------------------------------
build_release
rm -f "$BUILD"/fcgi-host_*.deb
(cd "$BUILD" && cpack -G DEB >"$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log"; fail "cpack"; }
DEB=$(ls "$BUILD"/fcgi-host_*.deb)
[ -s "$BUILD/fcgi-host.debug" ] || fail "no fcgi-host.debug (debug symbols kept apart)"

step "lintian $(basename "$DEB")"
lintian --fail-on error,warning --no-tag-display-limit "$DEB" || fail "lintian"
echo "lintian: no error, no warning"

step "package $(basename "$DEB")"
dpkg-deb --field "$DEB"
echo
dpkg-deb --contents "$DEB" | tee "$WORK/contents.txt"
for path in ./usr/bin/fcgi-host ./etc/fcgi-host/fcgi-host.conf ./etc/fcgi-host/pools.d/www.conf \
    ./lib/systemd/system/fcgi-host.service \
    ./lib/systemd/system/fcgi-host.socket ./usr/share/man/man1/fcgi-host.1.gz \
    ./usr/include/fcgi-host/app/plugin.hpp ./usr/include/fcgi-host/fcgi_host/run.hpp \
    ./usr/share/doc/fcgi-host/examples/nginx-upstream-cluster.conf ./usr/share/doc/fcgi-host/copyright \
    ./usr/share/doc/fcgi-host/changelog.gz ./etc/init.d/fcgi-host; do
    grep -q " $path\$" "$WORK/contents.txt" || fail "$path missing from the package"
done
grep -q '/cmake/fcgi_host/fcgi_hostConfig.cmake$' "$WORK/contents.txt" || fail "no CMake config"
dpkg-deb --field "$DEB" Depends | grep -q libfcgi0ldbl || fail "Depends lacks libfcgi0ldbl"
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles >"$WORK/conffiles"
grep -qx /etc/fcgi-host/fcgi-host.conf "$WORK/conffiles" ||
    fail "fcgi-host.conf is not a conffile"
grep -qx /etc/fcgi-host/pools.d/www.conf "$WORK/conffiles" ||
    fail "pools.d/www.conf is not a conffile"

# ---- Install ----------------------------------------------------------------------------------
step "install"
cp "$DEB" "$WORK/"
INSTALLED=1
(cd "$WORK" && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "./$(basename "$DEB")")
/usr/bin/fcgi-host --version
# The unit's ExecStartPre runs --test-config after systemd made RuntimeDirectory (/run/fcgi-host,
# 0755), where the sockets go: make it as systemd does, and remove it after if it was not there.
made_run_dir=0
[[ -d /run/fcgi-host ]] || { install -d -m 0755 /run/fcgi-host && made_run_dir=1; }
/usr/bin/fcgi-host --config /etc/fcgi-host/fcgi-host.conf --test-config ||
    fail "the shipped config does not pass --test-config"
if (( made_run_dir )); then rmdir /run/fcgi-host; fi
getent passwd fcgi-host >/dev/null || fail "no system user fcgi-host after install"
man -w fcgi-host >/dev/null 2>&1 || [ -f /usr/share/man/man1/fcgi-host.1.gz ] || fail "man page"
if command -v systemd-analyze >/dev/null; then
    # Man pages may be absent (docker images exclude them): only unit errors count.
    out=$(systemd-analyze verify /lib/systemd/system/fcgi-host.service \
        /lib/systemd/system/fcgi-host.socket 2>&1 | grep -v "Command 'man " || true)
    [ -z "$out" ] || { echo "$out"; fail "systemd-analyze verify"; }
    echo "systemd-analyze verify: units OK"
fi

# ---- The packaged service behind Debian's nginx ------------------------------------------------
step "the packaged service behind Debian's nginx service"
# postinst starts the service where policy-rc.d allows it (not in most containers).
if ! service fcgi-host status >/dev/null 2>&1; then
    service fcgi-host start || { cat /var/log/fcgi-host/error.log 2>/dev/null; fail "service start"; }
fi
for _ in $(seq 100); do [ -S /run/fcgi-host/fcgi-host.sock ] && break; sleep 0.1; done
[ -S /run/fcgi-host/fcgi-host.sock ] || { cat /var/log/fcgi-host/error.log; fail "no socket"; }
perms=$(stat -c '%U:%G %a' /run/fcgi-host/fcgi-host.sock)
[ "$perms" = "root:www-data 660" ] || fail "socket is $perms, expected root:www-data 660"
MASTER=$(cat /run/fcgi-host/fcgi-host.pid)
# The shipped config runs pools.d/www.conf: the master of the pools, the pool's master (started
# with --pool www), then its workers.
POOL=""
for _ in $(seq 100); do POOL=$(pgrep -P "$MASTER" -f -- '--pool www' || true); [ -n "$POOL" ] && break; sleep 0.1; done
[ -n "$POOL" ] || fail "no master of pool [www] under $MASTER"
for _ in $(seq 100); do pgrep -P "$POOL" >/dev/null && break; sleep 0.1; done
workers=$(ps -o user= --ppid "$POOL" | sort -u | tr -d ' ')
[ "$workers" = fcgi-host ] || fail "workers run as '$workers', expected fcgi-host"
echo "socket $perms, pool [www] master $POOL, workers run as $workers"

# Debian's nginx as packaged, with the package's site snippet enabled on a free loopback port
# (the stock default site moved aside so that nothing binds port 80).
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
service nginx status >/dev/null 2>&1 && NGINX_WAS_RUNNING=1
NGINX_TOUCHED=1
if [ -e /etc/nginx/sites-enabled/default ]; then
    mv /etc/nginx/sites-enabled/default "$WORK/nginx-default-site"
    NGINX_DEFAULT_MOVED=1
fi
sed -e "s/listen 80;/listen 127.0.0.1:$PORT;/" \
    /usr/share/doc/fcgi-host/examples/nginx-fcgi-host.conf >"$NGINX_SITE"
nginx -t -q || fail "nginx -t with the package's site snippet"
if [ "$NGINX_WAS_RUNNING" = 1 ]; then service nginx reload; else service nginx start; fi
out=""
for _ in $(seq 50); do
    out=$(curl -sf "http://127.0.0.1:$PORT/" || true)
    [ "$out" = OK ] && break
    sleep 0.1
done
[ "$out" = OK ] || { tail -5 /var/log/nginx/error.log; fail "curl through nginx got '$out'"; }
echo "curl http://127.0.0.1:$PORT/ through Debian's nginx: $out"
restore_nginx
STOPPED=$MASTER
stop_service || fail "the packaged service did not stop"
echo "service fcgi-host stop: master $STOPPED gone"

step "installed headers compile standalone"
MULTIARCH=$(gcc -print-multiarch)
for h in /usr/include/fcgi-host/app/*.hpp /usr/include/fcgi-host/fcgi_host/*.hpp /usr/include/fcgi-host/fcgi_host/*/*.hpp; do
    printf '#include "%s"\n#include "%s"\n' "$h" "$h" >"$WORK/header.cpp"
    g++ -std=c++20 -Wall -Wextra -fsyntax-only -I/usr/include/fcgi-host "$WORK/header.cpp" ||
        fail "$h does not compile on its own"
done
echo "ok: $(ls /usr/include/fcgi-host/app/*.hpp /usr/include/fcgi-host/fcgi_host/*.hpp /usr/include/fcgi-host/fcgi_host/*/*.hpp | wc -l) headers"
for lib in libfcgi-host-app.a libfcgi-host-core.a libfcgi-host-serving.a libfcgi-host-codec.a \
    libfcgi-host-process-manager.a libfcgi-host-protocol.a libfcgi-host-test-client.a; do
    [ -f "/usr/lib/$MULTIARCH/$lib" ] || fail "/usr/lib/$MULTIARCH/$lib missing"
done

# ---- A handler project out of tree ------------------------------------------------------------
step "out-of-tree plugin and own main with find_package(fcgi_host)"
mkdir -p "$WORK/src"
cat >"$WORK/src/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(my_handlers LANGUAGES CXX)
find_package(fcgi_host 0.1 REQUIRED)

# A plugin: headers only; the app:: code comes from the fcgi-host that loads it.
add_library(hello_plugin MODULE plugin.cpp)
target_link_libraries(hello_plugin PRIVATE fcgi_host::app)

# A program with its own main: links the host in.
add_executable(my_host main.cpp)
target_link_libraries(my_host PRIVATE fcgi_host::fcgi_host)

# A handler's own test: the handler in-process, spoken to with the raw FastCGI test client.
add_executable(my_handler_test handler_test.cpp)
target_link_libraries(my_handler_test PRIVATE fcgi_host::fcgi_host fcgi_host::fcgi_test_client)
EOF
cat >"$WORK/src/handler_test.cpp" <<'EOF'
#include <app/router.hpp>
#include <fcgi_host/runners/in_process_host.hpp>
#include <fcgi_host/testing/fcgi_test_client.hpp>

#include <cstdio>

int main() {
  app::Router router;
  router.get("/hi", [](const app::Request&, app::Response& res) { res.set_content("hi", "text/plain"); });
  fcgi_host::InProcessHost host(router);
  auto client = fcgi_test::Client::connect(host.address());
  fcgi_test::Response r = client.request("GET", "/hi");
  std::printf("in-process handler test: %d %s\n", r.status, r.body.c_str());
  return r.status == 200 && r.body == "hi" ? 0 : 1;
}
EOF
cat >"$WORK/src/plugin.cpp" <<'EOF'
#include <app/plugin.hpp>
#include <app/router.hpp>

#include <string>

class Hello : public app::Handler {
public:
  Hello() {
    router_.get("/hello", [](const app::Request& req, app::Response& res) {
      res.set_content("plugin says hello to " + std::string(req.query_arg("name")) + "\n",
                      "text/plain");
    });
  }
  void handle(const app::Request& req, app::Response& res) override { router_.handle(req, res); }

private:
  app::Router router_;
};

FCGI_HOST_PLUGIN(Hello)
EOF
cat >"$WORK/src/main.cpp" <<'EOF'
#include <app/router.hpp>
#include <fcgi_host/run.hpp>

#include <string>

int main(int argc, char** argv) {
  app::Router router;
  router.post("/echo", [](const app::Request& req, app::Response& res) {
    res.set_content("own main got " + req.body() + "\n", "text/plain");
  });
  return fcgi_host::run(argc, argv, router);
}
EOF
cmake -S "$WORK/src" -B "$WORK/src/build" -DCMAKE_BUILD_TYPE=Release >"$WORK/user.log" 2>&1 ||
    { cat "$WORK/user.log"; fail "find_package(fcgi_host)"; }
cmake --build "$WORK/src/build" -j"$(nproc)" >>"$WORK/user.log" 2>&1 ||
    { cat "$WORK/user.log"; fail "building against the installed package"; }
grep -i 'warning' "$WORK/user.log" && fail "warnings building against the package"
echo "built: $(cd "$WORK/src/build" && ls libhello_plugin.so my_host my_handler_test)"
"$WORK/src/build/my_handler_test" || fail "the in-process handler test built against the package"

# ---- Serve ------------------------------------------------------------------------------------
# Starts a host in the background and waits (10 s at most) for its socket.
start_host() { # log sock command...
    local log=$1 sock=$2
    shift 2
    "$@" >"$log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do
        [ -S "$sock" ] && return 0
        kill -0 "$!" 2>/dev/null || break
        sleep 0.1
    done
    cat "$log"
    fail "$* did not start"
}
# cgi-fcgi (libfcgi-bin) as the web server: params from the environment, body on stdin.
fcgi_request() { # sock method uri [body]
    local sock=$1 method=$2 uri=$3 body=${4:-}
    printf '%s' "$body" | env -i REQUEST_METHOD="$method" REQUEST_URI="$uri" \
        SCRIPT_NAME="${uri%%\?*}" QUERY_STRING="$([[ $uri == *\?* ]] && echo "${uri#*\?}")" \
        CONTENT_LENGTH="${#body}" CONTENT_TYPE=text/plain SERVER_PROTOCOL=HTTP/1.1 \
        timeout 10 cgi-fcgi -bind -connect "$sock"
}
stop_host() { # pid log
    kill -TERM "$1"
    for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$1" 2>/dev/null; then cat "$2"; fail "host $1 did not stop on TERM within 10 s"; fi
    local rc=0
    wait "$1" || rc=$?
    PIDS=()
    [ $rc -eq 0 ] || { cat "$2"; fail "host $1 exited with status $rc (expected 0 after TERM)"; }
}

step "installed /usr/bin/fcgi-host --app libhello_plugin.so"
start_host "$WORK/plugin.log" "$WORK/plugin.sock" /usr/bin/fcgi-host \
    --app "$WORK/src/build/libhello_plugin.so" --listen "unix:$WORK/plugin.sock" --workers 2
out=$(fcgi_request "$WORK/plugin.sock" GET "/hello?name=debian")
printf '%s\n' "$out"
grep -q '^plugin says hello to debian$' <<<"$out" || { cat "$WORK/plugin.log"; fail "plugin answer"; }
out=$(fcgi_request "$WORK/plugin.sock" GET "/nowhere")
grep -q '^Status: 404' <<<"$out" || fail "plugin router 404: $out"
stop_host "${PIDS[-1]}" "$WORK/plugin.log"

step "own main (my_host) linked against the installed libraries"
start_host "$WORK/main.log" "$WORK/main.sock" "$WORK/src/build/my_host" \
    --listen "unix:$WORK/main.sock" --workers 1
out=$(fcgi_request "$WORK/main.sock" POST /echo "package test")
printf '%s\n' "$out"
grep -q '^own main got package test$' <<<"$out" || { cat "$WORK/main.log"; fail "own main answer"; }
stop_host "${PIDS[-1]}" "$WORK/main.log"

# ---- Remove -----------------------------------------------------------------------------------
if [ "${KEEP_PACKAGE:-0}" != 1 ]; then
    step "remove"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q fcgi-host
    INSTALLED=0
    [ ! -e /usr/bin/fcgi-host ] || fail "/usr/bin/fcgi-host still there after purge"
    [ ! -e /etc/fcgi-host/fcgi-host.conf ] || fail "/etc/fcgi-host/fcgi-host.conf still there after purge"
    [ ! -d /usr/include/fcgi-host ] || fail "/usr/include/fcgi-host still there after purge"
    for path in /etc/fcgi-host /var/log/fcgi-host /run/fcgi-host /etc/init.d/fcgi-host; do
        [ ! -e "$path" ] || fail "$path still there after purge"
    done
    ! getent passwd fcgi-host >/dev/null || fail "user fcgi-host still there after purge"
    ! getent group fcgi-host >/dev/null || fail "group fcgi-host still there after purge"
    ! kill -0 "$STOPPED" 2>/dev/null || fail "the packaged fcgi-host ($STOPPED) still runs after purge"
fi
