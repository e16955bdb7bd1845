#!/usr/bin/env bash
# The README's demo: fcgi-host (hello app) on a Unix socket behind a private nginx on
# 127.0.0.1:8080. Installs what is missing (Debian 12), builds Release into build/.
# Ctrl-C stops both and removes the temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."

# What it needs: the groups build and demo of scripts/debian-packages.txt.
source scripts/debian-packages.sh
install_debian_packages build demo

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFCGI_HOST_TESTS=OFF
cmake --build build -j"$(nproc)" --target fcgi-host

dir=$(mktemp -d /tmp/fcgi-host-demo.XXXXXX)
host_pid=""
nginx_pid=""
cleanup() {
  trap - INT TERM EXIT
  # By pid, never by name: other nginx or fcgi-host processes on this machine are not ours.
  [[ -n $nginx_pid ]] && kill -QUIT "$nginx_pid" 2>/dev/null || true
  [[ -n $host_pid ]] && kill -TERM "$host_pid" 2>/dev/null || true
  for pid in $nginx_pid $host_pid; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$dir"
  echo "stopped; removed $dir"
}
trap cleanup INT TERM EXIT

sock="$dir/host.sock"
build/fcgi_host/fcgi-host --listen "unix:$sock" --app hello --workers 2 2>"$dir/host.log" &
host_pid=$!

mkdir -p "$dir/temp"
# user root: nginx started as root would otherwise run its worker as www-data, which cannot
# reach a socket in this private temp dir.
cat >"$dir/nginx.conf" <<CONF
daemon off;
master_process on;
worker_processes 1;
$( (( EUID == 0 )) && echo "user root;" )
error_log $dir/nginx-error.log notice;
pid $dir/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/temp/client_body;
  proxy_temp_path $dir/temp/proxy;
  fastcgi_temp_path $dir/temp/fastcgi;
  uwsgi_temp_path $dir/temp/uwsgi;
  scgi_temp_path $dir/temp/scgi;
  server {
    listen 127.0.0.1:8080;
    location / {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_NAME \$fastcgi_script_name;
      fastcgi_param HTTP_X_REQUEST_START "t=\${msec}";
      fastcgi_pass unix:$sock;
    }
  }
}
CONF
/usr/sbin/nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/nginx-error.log" &
nginx_pid=$!

for _ in $(seq 100); do
  [[ -S $sock ]] && curl -sf -o /dev/null http://127.0.0.1:8080/ && break
  kill -0 "$host_pid" 2>/dev/null || { echo "fcgi-host exited:"; cat "$dir/host.log"; exit 1; }
  kill -0 "$nginx_pid" 2>/dev/null || { echo "nginx exited:"; cat "$dir/nginx-error.log"; exit 1; }
  sleep 0.1
done

echo "fcgi-host (pid $host_pid) on unix:$sock, nginx (pid $nginx_pid) on 127.0.0.1:8080"
echo
echo "  curl http://127.0.0.1:8080/"
echo
echo -n "answer: "
curl -s http://127.0.0.1:8080/
echo
echo "logs in $dir; Ctrl-C to stop"
wait
