#!/usr/bin/env bash
# Builds the container images offline, from this project's build and the Debian packages
# installed on this machine (no registry, no base image: each image is FROM scratch):
#   localhost/fcgi-host:VERSION        the host (stripped), the shared libraries ldd names, the
#                                      dynamic loader, /etc/passwd with the user fcgi-host
#                                      (10001), `sleep` for a preStop hook; entrypoint
#                                      fcgi-host, no shell
#   localhost/fcgi-host-nginx:VERSION  Debian's nginx, its libraries, mime.types, fastcgi_params
#                                      and conf/containers/nginx-sidecar.conf; `sleep` for preStop
#   localhost/NAME:VERSION             with --plugin FILE: your handler FROM the host image
#                                      (conf/containers/Containerfile.app): the plugin as
#                                      /usr/lib/fcgi-host/app.so, the libraries it needs that the
#                                      host image lacks, and the FILEs given after the options;
#                                      the plugin is then loaded once in the image (--test-config)
#   localhost/fcgi-host-notes:VERSION  with --notes: the same for the notes example (SQLite)
# Prints each image's size. The Containerfiles are in conf/containers/.
#
# Usage: scripts/image.sh [--notes] [--build-dir DIR] [--tag VERSION] [--binary FILE]
#                         [--plugin FILE [--name NAME]] [FILE[:/PATH]...]
#   --binary FILE  the fcgi-host to put in the image as it is, with the libraries it loads,
#                  instead of a Release build in DIR (scripts/kube-test.sh: the test build's)
#   --plugin FILE  a handler plugin (built on Debian 12 against this fcgi-host)
#   --name NAME    its image's name (default: the plugin's file name without lib and .so)
#   FILE[:/PATH]   a file for the plugin's image: at /PATH, or /srv/NAME/ and its own name
# Environment: PODMAN (default: podman), CONTAINERS_CONF as podman reads it.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD

build_dir=build-image
notes=0
binary=
plugin=
name=
files=()
tag=$(sed -n 's/.*kVersion = "\(.*\)";.*/\1/p' fcgi_host/config/version.hpp)
while (($#)); do
  case $1 in
  --notes) notes=1 ;;
  --build-dir) build_dir=$2; shift ;;
  --tag) tag=$2; shift ;;
  --binary) binary=$2; shift ;;
  --plugin) plugin=$2; shift ;;
  --name) name=$2; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  *) files+=("$1") ;;
  esac
  shift
done
podman=${PODMAN:-podman}
uid=10001
((${#files[@]} == 0)) || [[ -n $plugin ]] || { echo "image.sh: FILE arguments go with --plugin" >&2; exit 2; }
if [[ -n $plugin ]]; then
  ((!notes)) || { echo "image.sh: --plugin or --notes, not both" >&2; exit 2; }
  [[ -f $plugin ]] || { echo "image.sh: --plugin $plugin: no such file" >&2; exit 2; }
  plugin=$(realpath "$plugin")
  if [[ -z $name ]]; then
    name=$(basename "$plugin" .so)
    name=${name#lib}
  fi
  [[ $name =~ ^[a-z0-9][a-z0-9._-]*$ ]] ||
    { echo "image.sh: image name '$name': lower-case letters, digits, . _ - only (--name)" >&2; exit 2; }
  for f in "${files[@]}"; do
    [[ -f ${f%%:/*} ]] || { echo "image.sh: $f: no such file" >&2; exit 2; }
  done
fi

if [[ -n $binary ]]; then
  ((!notes)) || { echo "image.sh: --notes builds in --build-dir; not with --binary" >&2; exit 2; }
  [[ -f $binary && -x $binary ]] || { echo "image.sh: --binary $binary: no such program" >&2; exit 2; }
  echo "image.sh: fcgi-host from $binary (not built here)"
else
  targets=(fcgi-host)
  ((notes)) && targets+=(notes_app)
  echo "image.sh: building ${targets[*]} (Release) in $build_dir"
  mkdir -p "$build_dir"
  if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DFCGI_HOST_TESTS=OFF &&
    cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}"; } >"$build_dir/image-build.log" 2>&1; then
    tail -30 "$build_dir/image-build.log"
    echo "image.sh: the build failed (whole log: $build_dir/image-build.log)" >&2
    exit 1
  fi
  binary=$build_dir/fcgi_host/fcgi-host
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/fcgi-host-image.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# add_program ROOT SOURCE DEST: SOURCE at ROOT/DEST, and every shared library it loads (as ldd
# resolves them on this machine) with the dynamic loader, each at its own path.
add_program() {
  local root=$1 source=$2 dest=$3 lib
  install -D -m 755 "$source" "$root$dest"
  while read -r lib; do
    # (with its mode: the loader must stay executable)
    [[ -e $root$lib ]] || install -D -m "$(stat -L -c %a "$lib")" "$lib" "$root$lib"
  done < <(ldd "$source" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
}

# add_base ROOT USER: the files every image needs: a user and group to run as, /tmp, and the
# socket directory the pod's containers share.
add_base() {
  local root=$1 user=$2
  mkdir -p "$root/etc" "$root/tmp" "$root/run/fcgi-host"
  printf 'root:x:0:0:root:/root:/usr/sbin/nologin\n%s:x:%d:%d:%s:/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
    "$user" "$uid" "$uid" "$user" >"$root/etc/passwd"
  printf 'root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n' "$user" "$uid" >"$root/etc/group"
  chmod 1777 "$root/tmp"
  chmod 0775 "$root/run/fcgi-host"
}

# pack ROOT: ROOT/rootfs.tar, every file owned by root but the shared socket directory.
pack() {
  local root=$1
  tar -C "$root/fs" --numeric-owner --owner=0 --group=0 --exclude=./run/fcgi-host \
    -cf "$root/rootfs.tar" .
  tar -C "$root/fs" --numeric-owner --owner=$uid --group=$uid --no-recursion \
    -rf "$root/rootfs.tar" ./run/fcgi-host
}

build() { # build NAME CONTEXT CONTAINERFILE [ARGS...]
  local name=$1 context=$2 file=$3
  shift 3
  "$podman" build --quiet -t "localhost/$name:$tag" -f "$file" "$@" "$context" >/dev/null
  local size
  size=$("$podman" image inspect --format '{{.Size}}' "localhost/$name:$tag")
  awk -v n="localhost/$name:$tag" -v s="$size" 'BEGIN { printf "image.sh: %s  %d bytes (%.1f MB)\n", n, s, s / 1e6 }'
}

# The host.
host=$stage/host
add_program "$host/fs" "$binary" /usr/bin/fcgi-host
strip --strip-unneeded "$host/fs/usr/bin/fcgi-host"
add_program "$host/fs" "$(command -v sleep)" /usr/bin/sleep
install -D -m 644 LICENSE "$host/fs/usr/share/doc/fcgi-host/LICENSE"
add_base "$host/fs" fcgi-host
pack "$host"
build fcgi-host "$host" conf/containers/Containerfile.host

# nginx beside it.
nginx=$stage/nginx
add_program "$nginx/fs" /usr/sbin/nginx /usr/sbin/nginx
add_program "$nginx/fs" "$(command -v sleep)" /usr/bin/sleep
install -D -m 644 /etc/nginx/mime.types "$nginx/fs/etc/nginx/mime.types"
install -D -m 644 /etc/nginx/fastcgi_params "$nginx/fs/etc/nginx/fastcgi_params"
install -D -m 644 conf/containers/nginx-sidecar.conf "$nginx/fs/etc/nginx/nginx.conf"
add_base "$nginx/fs" fcgi-host
pack "$nginx"
build fcgi-host-nginx "$nginx" conf/containers/Containerfile.nginx

# A handler's image (--plugin, or --notes: the notes example): conf/containers/Containerfile.app
# on the host image just built; only what the host image lacks is added.
if ((notes)); then
  plugin=$root_dir/$build_dir/examples/libnotes_app.so
  name=fcgi-host-notes
fi
if [[ -n $plugin ]]; then
  app=$stage/app
  add_program "$app/fs" "$plugin" /usr/lib/fcgi-host/app.so
  chmod 644 "$app/fs/usr/lib/fcgi-host/app.so"
  # The libraries the host image has already (libc, libstdc++...) stay out.
  (cd "$app/fs" && find . -type f ! -path ./usr/lib/fcgi-host/app.so | while read -r f; do
    [[ ! -e $host/fs/$f ]] || rm "$f"
  done)
  for f in "${files[@]}"; do
    source=${f%%:/*}
    dest=/srv/$name/$(basename "$source")
    [[ $f == *:/* ]] && dest=/${f#*:/}
    install -D -m 644 "$source" "$app/fs$dest"
  done
  tar -C "$app/fs" --numeric-owner --owner=0 --group=0 -cf "$app/rootfs.tar" .
  build "$name" "$app" conf/containers/Containerfile.app --build-arg "HOST_IMAGE=localhost/fcgi-host:$tag"
  # The plugin loads in the image, as the workers load it (its ABI, its libraries).
  if ! check=$("$podman" run --rm "localhost/$name:$tag" --test-config --listen 127.0.0.1:9000 \
    --app /usr/lib/fcgi-host/app.so 2>&1); then
    echo "$check" >&2
    echo "image.sh: localhost/$name:$tag: the plugin does not load in the image (above)" >&2
    exit 1
  fi
  echo "image.sh: localhost/$name:$tag: the plugin loads (fcgi-host --test-config in the image)"
fi
