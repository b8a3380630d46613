#!/usr/bin/env bash
# Installs what Sovereign's build and tests need on a fresh Debian/Ubuntu
# machine: Chromium (its headless shell and the full browser), protoc, the
# Node packages of the e2e clients and of ESLint (make lint), and the
# PostgreSQL server binaries (history's tests start their own server).
# `deps.sh chromium` installs only Chromium. Needs root (or sudo) for apt.
# Not in the default list: `deps.sh docker` (a Docker engine, started when
# none answers, with the compose >= 2.24 and buildx CLI plugins, built from
# the Go module proxy when missing) and `deps.sh debootstrap`; `deps.sh
# jslint` installs only ESLint's packages (make lint-js); `deps.sh k8s` the
# Debian parts of the local Kubernetes (scripts/k8s-local.sh, make e2e-helm).
# Progress goes to stderr: callers capture what other scripts print on stdout
# (docker-offline.sh takes a path from its functions' output).
set -euo pipefail
cd "$(dirname "$0")/.."

want=("${@:-chromium protoc node postgres}")
want=(${want[@]})

apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "missing: $* — install it with: apt-get install -y $*" >&2; exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null; then
    echo "missing: $* — install it with your package manager (Debian: apt-get install -y $*)" >&2; exit 1
  fi
  echo "installing $* (apt-get)…" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# npm_ci installs the Node packages of dir (npm ci) when they are missing
# or older than its package-lock.json, and npm itself when it is missing.
npm_ci() {
  local dir=$1
  [ -f $dir/package.json ] || return 0
  command -v npm >/dev/null || apt_install nodejs npm
  if [ ! -d $dir/node_modules ] || [ $dir/package-lock.json -nt $dir/node_modules ]; then
    echo "installing $dir Node packages (npm ci)…" >&2
    (cd $dir && npm ci --no-audit --no-fund --loglevel=error) >&2
  fi
}

for w in "${want[@]}"; do
  case "$w" in
    chromium)
      if [ -z "${SOVEREIGN_CHROME:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null \
         && ! command -v google-chrome >/dev/null; then
        apt_install chromium
      fi
      # The browser worker prefers the headless shell when it is installed
      # (cheaper per operation); the full browser stays for the console's
      # UI tests and for --chrome full.
      if [ -z "${SOVEREIGN_CHROME:-}" ] && [ ! -x /usr/lib/chromium/chromium-headless-shell ] \
         && ! command -v chromium-headless-shell >/dev/null && command -v apt-get >/dev/null; then
        apt_install chromium-headless-shell
      fi ;;
    protoc)
      # libprotobuf-dev holds the well-known types' .proto files
      # (google/protobuf/struct.proto: a tool's structured result).
      if ! command -v protoc >/dev/null || [ ! -f /usr/include/google/protobuf/struct.proto ]; then
        apt_install protobuf-compiler libprotobuf-dev
      fi ;;
    node)
      # e2e/client-ts: the TypeScript SDK client; e2e/corpus: the
      # compatibility corpus (the todomvc package's apps) and Playwright MCP
      # for make bench; services/browser/lighthouse: the Lighthouse runner
      # of lighthouse_audit, which the browser tests run; scripts/jslint:
      # ESLint for the browser's in-page JavaScript (make lint).
      for dir in e2e/client-ts e2e/corpus services/browser/lighthouse scripts/jslint; do
        npm_ci $dir
      done ;;
    jslint)
      # make lint-js: only ESLint's packages.
      npm_ci scripts/jslint ;;
    lighthouse)
      # make lighthouse (and make run): the runner of lighthouse_audit.
      # Without Node.js it only says so: the worker then answers
      # lighthouse_audit with FAILED_PRECONDITION, everything else works.
      dir=services/browser/lighthouse
      if ! command -v node >/dev/null || ! command -v npm >/dev/null \
         || ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 18 || a === 18 && b >= 16 ? 0 : 1)'; then
        echo "lighthouse_audit is off: it needs Node.js >= 18.16 and npm (Debian: apt-get install nodejs npm), then make lighthouse" >&2
      elif [ ! -f $dir/node_modules/.package-lock.json ] || [ $dir/package-lock.json -nt $dir/node_modules/.package-lock.json ]; then
        echo "installing the Lighthouse runner ($dir, npm ci)…" >&2
        (cd $dir && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts >/dev/null) \
          || echo "lighthouse_audit is off: npm ci failed in $dir (no registry?)" >&2
      fi ;;
    postgres)
      # initdb, pg_ctl and postgres: Debian keeps them out of PATH, in
      # /usr/lib/postgresql/<version>/bin (installing may start a default
      # cluster; the tests do not use it).
      if ! command -v initdb >/dev/null && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        apt_install postgresql
      fi ;;
    k8s)
      # containerd and runc run the pods, the CNI plugins (bridge,
      # host-local, loopback, portmap) wire them, etcd stores the API,
      # iptables and conntrack serve kube-proxy; the Kubernetes binaries
      # themselves are built by scripts/k8s-local.sh.
      if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || ! command -v etcd >/dev/null \
         || [ ! -x /usr/lib/cni/bridge ] || ! command -v iptables >/dev/null || ! command -v conntrack >/dev/null; then
        apt_install containerd runc containernetworking-plugins etcd-server iptables conntrack
      fi ;;
    debootstrap)
      command -v debootstrap >/dev/null || apt_install debootstrap ;;
    docker)
      if ! docker version >/dev/null 2>&1; then
        command -v dockerd >/dev/null || apt_install docker.io
        if [ "$(id -u)" != 0 ]; then echo "no Docker engine answers: start one (dockerd as root)" >&2; exit 1; fi
        # No init system on CI machines: start the engine ourselves, for
        # this and later runs (it keeps the image and build caches).
        echo "starting dockerd (log: /var/log/dockerd.log)…" >&2
        nohup dockerd >/var/log/dockerd.log 2>&1 </dev/null &
        for _ in $(seq 60); do docker version >/dev/null 2>&1 && break; sleep 1; done
        docker version >/dev/null || { tail -20 /var/log/dockerd.log >&2; exit 1; }
      fi
      # compose >= 2.24 (env_file with `required`) and buildx; Debian 12
      # packages neither (its docker-compose 1.29 rejects the file).
      min_compose=2.24 # deploy/docs_test.go: the docs say the same
      if ! docker buildx version >/dev/null 2>&1 || ! docker compose version --short 2>/dev/null \
           | awk -F. -v min="$min_compose" '{ split(min, m, "."); sub(/^v/, "", $1); exit !($1 > m[1] || ($1 == m[1] && $2 >= m[2])) }'; then
        ./scripts/docker-offline.sh plugins
      fi ;;
    *) echo "deps.sh: unknown component $w" >&2; exit 2 ;;
  esac
done
