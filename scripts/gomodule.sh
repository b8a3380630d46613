# Sourced by the scripts that build Go programs from their modules on the
# Go module proxy (docker-offline.sh, k8s-local.sh), which define log.

# module_copy MODULE VERSION: download MODULE@VERSION and print a work
# directory whose src/ is a writable copy of it, where the module's own
# go.mod, replace and exclude directives apply. The caller removes it.
module_copy() {
  local work dir
  work=$(mktemp -d)
  dir=$(cd "$work" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { log "go mod download $1@$2: no directory"; rm -rf "$work"; return 1; }
  cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
  echo "$work"
}

# go_build_in DIR OUT LDFLAGS PACKAGE...: build static, stripped PACKAGEs
# in the module at DIR into OUT (a file, or a directory ending in /), with
# GO_BUILD_FLAGS (e.g. -p=1) and under nice: other work shares the machine.
go_build_in() {
  local dir=$1 out=$2 ldflags=$3
  shift 3
  (cd "$dir" && GOWORK=off GOFLAGS="-mod=mod ${GO_BUILD_FLAGS:-}" CGO_ENABLED=0 \
    nice -n 19 go build -trimpath -ldflags "-s -w $ldflags" -o "$out" "$@")
}
