#!/usr/bin/env bash
# Installs what Sovereign's build and tests need on a fresh Debian/Ubuntu
# machine: Chromium, protoc, the Node packages of the e2e clients, and the
# PostgreSQL server binaries (history's tests start their own server).
# `deps.sh chromium` installs only Chromium. Needs root (or sudo) for apt.
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
  echo "installing $* (apt-get)…"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

for w in "${want[@]}"; do
  case "$w" in
    chromium)
      if [ -z "${SOVEREIGN_CHROME:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null \
         && ! command -v google-chrome >/dev/null; then
        apt_install chromium
      fi ;;
    protoc)
      command -v protoc >/dev/null || apt_install protobuf-compiler ;;
    node)
      # e2e/client-ts: the TypeScript SDK client; e2e/corpus: the
      # compatibility corpus (the todomvc package's apps) and Playwright MCP
      # for make bench.
      for dir in e2e/client-ts e2e/corpus; do
        if [ -f $dir/package.json ]; then
          command -v npm >/dev/null || apt_install nodejs npm
          if [ ! -d $dir/node_modules ] || [ $dir/package-lock.json -nt $dir/node_modules ]; then
            echo "installing $dir Node packages (npm ci)…"
            (cd $dir && npm ci --no-audit --no-fund --loglevel=error)
          fi
        fi
      done ;;
    postgres)
      # initdb, pg_ctl and postgres: Debian keeps them out of PATH, in
      # /usr/lib/postgresql/<version>/bin (installing may start a default
      # cluster; the tests do not use it).
      if ! command -v initdb >/dev/null && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        apt_install postgresql
      fi ;;
    *) echo "deps.sh: unknown component $w" >&2; exit 2 ;;
  esac
done
