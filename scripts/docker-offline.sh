#!/usr/bin/env bash
# What a Docker host without registry access needs to build and run the
# compose project (deploy/compose.yaml), made from the Go module proxy and
# Debian's packages only. The project's Dockerfiles and compose file stay
# what a user with registry access runs: this only fills what a registry
# would have served.
#
#   docker-offline.sh plugins   the compose and buildx CLI plugins, built from
#                               their Go modules into ~/.docker/cli-plugins
#   docker-offline.sh images    the public base images the Dockerfiles and
#                               compose.yaml name, each pulled if the
#                               registry answers and stood in locally under
#                               the same name and tag if it does not
#   docker-offline.sh rootfs    the minimal Debian 12 root filesystem the
#                               Debian stand-in is made of; prints only its
#                               tarball's path (progress goes to stderr)
#
# Everything built is cached in ~/.cache/sovereign-e2e (plugins, the
# debootstrap root filesystem, nats-server) and in the engine's image store
# (stand-in images are skipped when present), so a second run takes seconds.
# Stand-in images carry the label org.sovereign-fleet.stand-in=true.
# Needs root (debootstrap, docker), go on PATH, and a running engine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gomodule.sh

COMPOSE_VERSION=v2.40.3 # github.com/docker/compose/v2
BUILDX_VERSION=v0.38.2  # github.com/docker/buildx
NATS_VERSION=v2.15.3    # github.com/nats-io/nats-server/v2

# The images deploy/docker/*.Dockerfile and deploy/compose.yaml (and its
# .env) name. TestOfflineImagesMatchProject (deploy/) keeps this list
# in step with them.
GOLANG_IMAGE=golang:1.26-bookworm
DEBIAN_IMAGE=debian:bookworm-slim
DISTROLESS_IMAGE=gcr.io/distroless/static-debian12:nonroot
NATS_IMAGE=nats:2.15.3-alpine
JAEGER_IMAGE=jaegertracing/jaeger:2.13.0
POSTGRES_IMAGE=postgres:17-bookworm

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/sovereign-e2e"
STANDIN_LABEL=org.sovereign-fleet.stand-in=true
log() { echo "docker-offline: $*" >&2; }

# go_build_module MODULE VERSION PACKAGE OUT [LDFLAGS]: build PACKAGE of
# MODULE@VERSION from the Go module proxy into the file OUT.
go_build_module() {
  local mod=$1 ver=$2 pkg=$3 out=$4 ldflags=${5:-} work
  work=$(module_copy "$mod" "$ver")
  log "building $mod@$ver ($pkg; minutes on two cores, first time only)…"
  go_build_in "$work/src" "$out.tmp" "$ldflags" "$pkg"
  mv "$out.tmp" "$out"
  rm -rf "$work"
}

plugins() {
  local dest="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins" dir="$CACHE/docker-plugins"
  mkdir -p "$dest" "$dir"
  if [ ! -x "$dir/docker-compose-$COMPOSE_VERSION" ]; then
    go_build_module github.com/docker/compose/v2 "$COMPOSE_VERSION" ./cmd "$dir/docker-compose-$COMPOSE_VERSION" \
      "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION"
  fi
  if [ ! -x "$dir/docker-buildx-$BUILDX_VERSION" ]; then
    go_build_module github.com/docker/buildx "$BUILDX_VERSION" ./cmd/buildx "$dir/docker-buildx-$BUILDX_VERSION" \
      "-X github.com/docker/buildx/version.Version=$BUILDX_VERSION -X github.com/docker/buildx/version.Package=github.com/docker/buildx"
  fi
  install -m 0755 "$dir/docker-compose-$COMPOSE_VERSION" "$dest/docker-compose"
  install -m 0755 "$dir/docker-buildx-$BUILDX_VERSION" "$dest/docker-buildx"
  docker compose version >&2
  docker buildx version >&2
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# pull_or IMAGE FUNCTION: pull IMAGE; when the registry does not answer,
# run FUNCTION, which builds a stand-in tagged IMAGE.
pull_or() {
  local image=$1 standin=$2
  if have_image "$image"; then return; fi
  if docker pull -q "$image" >/dev/null 2>&1; then log "pulled $image"; return; fi
  log "cannot pull $image: standing it in"
  "$standin" "$image"
}

# standin_build IMAGE DIR: build DIR/Dockerfile with the classic builder,
# which takes FROM images from the local store without asking a registry.
standin_build() {
  local out
  if ! out=$(DOCKER_BUILDKIT=0 docker build -q --label "$STANDIN_LABEL" -t "$1" "$2" 2>&1); then
    echo "$out" >&2
    log "could not stand in $1"
    return 1
  fi
  log "stood in $1"
}

rootfs() { # a minimal Debian 12 root filesystem (debootstrap, cached as a tarball)
  local tar="$CACHE/rootfs/bookworm-minbase.tar"
  if [ ! -f "$tar" ]; then
    command -v debootstrap >/dev/null || ./scripts/deps.sh debootstrap >&2
    local dir
    dir=$(mktemp -d)
    log "debootstrap --variant=minbase bookworm (first time only)…"
    debootstrap --variant=minbase bookworm "$dir" http://deb.debian.org/debian >/dev/null
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    mkdir -p "$CACHE/rootfs"
    tar -C "$dir" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  echo "$tar"
}

debian_image() {
  docker import -c 'CMD ["bash"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -m "stand-in: debootstrap --variant=minbase bookworm" "$(rootfs)" "$1" >/dev/null
  log "stood in $1"
}

# golang: Debian plus this host's Go toolchain (it must be the image's
# minor version) and this host's CA bundle, because outgoing TLS may be
# re-signed by a local CA that the build's module downloads must trust.
golang_image() {
  local want=${1#golang:} goroot dir
  want=${want%%-*}
  case "$(go env GOVERSION)" in
    go"$want"|go"$want".*) ;;
    *) log "host go $(go env GOVERSION) is not $want: cannot stand in $1"; return 1 ;;
  esac
  pull_or "$DEBIAN_IMAGE" debian_image
  goroot=$(go env GOROOT)
  dir=$(mktemp -d)
  tar -C "$goroot" --exclude=./pkg/obj --exclude=./.git -cf "$dir/go.tar" .
  cp /etc/ssl/certs/ca-certificates.crt "$dir/"
  cat > "$dir/Dockerfile" <<EOF
FROM $DEBIAN_IMAGE
ADD go.tar /usr/local/go/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV GOLANG_VERSION=$(go env GOVERSION) GOTOOLCHAIN=local GOPATH=/go \
    PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /go/bin /go/src && chmod -R 1777 /go
WORKDIR /go
EOF
  standin_build "$1" "$dir"
  rm -rf "$dir"
}

# distroless static: no shell, passwd/group with nonroot (65532), CA
# certificates and tzdata, user nonroot.
distroless_image() {
  local dir
  dir=$(mktemp -d)
  mkdir -p "$dir/root/etc/ssl/certs" "$dir/root/usr/share" "$dir/root/tmp" "$dir/root/home/nonroot"
  chmod 1777 "$dir/root/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$dir/root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > "$dir/root/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$dir/root/etc/ssl/certs/"
  if [ -d /usr/share/zoneinfo ]; then cp -r /usr/share/zoneinfo "$dir/root/usr/share/"; fi
  chown 65532:65532 "$dir/root/home/nonroot"
  tar -C "$dir/root" -cf "$dir/rootfs.tar" .
  docker import -c 'USER 65532' -c 'WORKDIR /home/nonroot' \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    -m "stand-in: distroless static nonroot" "$dir/rootfs.tar" "$1" >/dev/null
  rm -rf "$dir"
  log "stood in $1"
}

# binary_image IMAGE BIN PATH DOCKERFILE-LINES: Debian with wget (the
# compose healthchecks run it) and BIN copied to PATH, then the lines.
binary_image() {
  local image=$1 bin=$2 path=$3 lines=$4 dir
  pull_or "$DEBIAN_IMAGE" debian_image
  dir=$(mktemp -d)
  cp "$bin" "$dir/binary"
  cat > "$dir/Dockerfile" <<EOF
FROM $DEBIAN_IMAGE
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends wget >/dev/null && rm -rf /var/lib/apt/lists/*
COPY binary $path
$lines
EOF
  standin_build "$image" "$dir"
  rm -rf "$dir"
}

# nats: nats-server built from its module.
nats_image() {
  local bin="$CACHE/nats-server-$NATS_VERSION"
  mkdir -p "$CACHE"
  [ -x "$bin" ] || go_build_module github.com/nats-io/nats-server/v2 "$NATS_VERSION" . "$bin"
  binary_image "$1" "$bin" /usr/local/bin/nats-server 'EXPOSE 4222 6222 8222
CMD ["nats-server"]'
}

# jaeger: the all-in-one the e2e suite builds (e2e/cmd/jaeger), with its
# built-in configuration listening on every interface and user 10001, as in
# the real image (Alpine, whose busybox has the wget of the healthcheck).
jaeger_image() {
  binary_image "$1" "$(go run ./e2e/cmd/jaeger)" /cmd/jaeger/jaeger-linux 'ENV JAEGER_LISTEN_HOST=0.0.0.0
EXPOSE 4317 4318 16686 13133
ENTRYPOINT ["/cmd/jaeger/jaeger-linux"]
USER 10001'
}

# postgres: Debian's PostgreSQL with the official image's interface:
# POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB on first start, data in
# /var/lib/postgresql/data, password authentication over the network.
postgres_image() {
  local dir
  pull_or "$DEBIAN_IMAGE" debian_image
  dir=$(mktemp -d)
  cat > "$dir/entrypoint.sh" <<'EOF'
#!/bin/sh
set -eu
export PGDATA=/var/lib/postgresql/data
bin=$(echo /usr/lib/postgresql/*/bin)
mkdir -p "$PGDATA" /var/run/postgresql
chown -R postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
  pw=$(mktemp) && printf '%s\n' "$POSTGRES_PASSWORD" > "$pw" && chown postgres "$pw"
  as_pg "$bin/initdb" -U "${POSTGRES_USER:-postgres}" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pw"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  as_pg "$bin/pg_ctl" -w -o "-c listen_addresses=''" start >/dev/null
  if [ "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
    as_pg "$bin/createdb" -U "${POSTGRES_USER:-postgres}" "$POSTGRES_DB"
  fi
  as_pg "$bin/pg_ctl" -w stop >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -c listen_addresses='*'
EOF
  cat > "$dir/Dockerfile" <<EOF
FROM $DEBIAN_IMAGE
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null \
 && rm -rf /var/lib/apt/lists/* && ln -s /usr/lib/postgresql/*/bin/pg_isready /usr/local/bin/pg_isready
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 755 /usr/local/bin/docker-entrypoint.sh
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
EOF
  standin_build "$1" "$dir"
  rm -rf "$dir"
}

images() {
  pull_or "$DEBIAN_IMAGE" debian_image
  pull_or "$GOLANG_IMAGE" golang_image
  pull_or "$DISTROLESS_IMAGE" distroless_image
  pull_or "$NATS_IMAGE" nats_image
  pull_or "$JAEGER_IMAGE" jaeger_image
  pull_or "$POSTGRES_IMAGE" postgres_image
}

case "${1:-}" in
  plugins) plugins ;;
  images) images ;;
  rootfs) rootfs ;;
  list) printf '%s\n' "$GOLANG_IMAGE" "$DEBIAN_IMAGE" "$DISTROLESS_IMAGE" "$NATS_IMAGE" "$JAEGER_IMAGE" "$POSTGRES_IMAGE" ;;
  *) echo "usage: $0 plugins|images|rootfs|list" >&2; exit 2 ;;
esac
