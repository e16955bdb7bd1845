#!/usr/bin/env bash
# Builds the container images offline, from this project's build and the Debian packages
# installed on this machine (no registry, no base image: each image is FROM scratch):
#   localhost/fcgi-host:VERSION        the host (stripped), the shared libraries ldd names, the
#                                      dynamic loader, /etc/passwd with the user fcgi-host
#                                      (10001), `sleep` for a preStop hook; entrypoint
#                                      fcgi-host, no shell
#   localhost/fcgi-host-nginx:VERSION  Debian's nginx, its libraries, mime.types, fastcgi_params
#                                      and conf/containers/nginx-sidecar.conf; `sleep` for preStop
#   localhost/fcgi-host-notes:VERSION  with --notes: the host image plus the notes example as a
#                                      plugin (conf/containers/Containerfile.notes, second stage)
# Prints each image's size. The Containerfiles are in conf/containers/.
#
# Usage: scripts/image.sh [--notes] [--build-dir DIR] [--tag VERSION] [--binary FILE]
#   --binary FILE  the fcgi-host to put in the image as it is, with the libraries it loads,
#                  instead of a Release build in DIR (scripts/kube-test.sh: the test build's)
# Environment: PODMAN (default: podman), CONTAINERS_CONF as podman reads it.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=$PWD

build_dir=build-image
notes=0
binary=
tag=$(sed -n 's/.*kVersion = "\(.*\)";.*/\1/p' fcgi_host/config/version.hpp)
while (($#)); do
  case $1 in
  --notes) notes=1 ;;
  --build-dir) build_dir=$2; shift ;;
  --tag) tag=$2; shift ;;
  --binary) binary=$2; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
podman=${PODMAN:-podman}
uid=10001

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

# The notes example: the Containerfile's second stage, its `build` stage replaced by an image of
# the same /out, built here with this machine's compiler (the first stage needs a compiler image
# from a registry: on a machine that has one, build conf/containers/Containerfile.notes as is).
if ((notes)); then
  out=$stage/notes-out
  plugin=$build_dir/examples/libnotes_app.so
  mkdir -p "$out/fs/out"
  add_program "$out/fs/out" "$plugin" /usr/lib/fcgi-host/libnotes_app.so
  # Only what the host image lacks: the plugin and SQLite (libc, libstdc++... are there).
  (cd "$out/fs/out" && find . -type f ! -name 'libnotes_app.so' ! -name 'libsqlite3.so*' -delete)
  tar -C "$out/fs" --numeric-owner --owner=0 --group=0 -cf "$out/rootfs.tar" .
  printf 'FROM scratch\nADD rootfs.tar /\n' >"$out/Containerfile"
  "$podman" build --quiet -t "localhost/fcgi-host-notes-build:$tag" -f "$out/Containerfile" \
    "$out" >/dev/null
  build fcgi-host-notes "$root_dir/conf/containers" conf/containers/Containerfile.notes \
    --build-arg "HOST_IMAGE=localhost/fcgi-host:$tag" \
    --build-arg "BUILD_STAGE=localhost/fcgi-host-notes-build:$tag"
  "$podman" rmi "localhost/fcgi-host-notes-build:$tag" >/dev/null
fi
