# Your own handler as an image, FROM the host image, offline (no registry, no compiler in the
# image): the plugin, the shared libraries it needs that the host image lacks, and your files.
#
#   scripts/image.sh --plugin build/libtodo.so [--name todo] [data/schema.sql ...]
#   podman run --rm -p 9000:9000 localhost/todo:0.1.0 --listen 0.0.0.0:9000 \
#       --app /usr/lib/fcgi-host/app.so
#
# image.sh lays out rootfs.tar (the plugin as /usr/lib/fcgi-host/app.so, each library at its
# own path, each FILE under /srv/NAME/ or at the path FILE:/path names) and builds this with
# --build-arg HOST_IMAGE=localhost/fcgi-host:VERSION, then loads the plugin in the image once
# (fcgi-host --test-config). By hand, the same in four lines, for a plugin that needs no library
# beyond the host's:
#
#   FROM localhost/fcgi-host:0.1.0
#   COPY build/libtodo.so /usr/lib/fcgi-host/app.so
#   USER 10001:10001
#   CMD ["--listen", "unix:/run/fcgi-host/fcgi-host.sock", "--app", "/usr/lib/fcgi-host/app.so"]
#
# Build the plugin on Debian 12 against this fcgi-host (the release the host image's libraries
# come from): the host checks its plugin ABI when it loads it, and says what differs.
ARG HOST_IMAGE=localhost/fcgi-host:0.1.0
FROM ${HOST_IMAGE}
ADD rootfs.tar /
USER 10001:10001
CMD ["--listen", "unix:/run/fcgi-host/fcgi-host.sock", "--app", "/usr/lib/fcgi-host/app.so"]
