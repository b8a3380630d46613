# A browser worker: sovereign browser driving a headless Chromium. Build
# from the repository root:
#   docker build -f deploy/docker/browser.Dockerfile -t ghcr.io/sovereign-fleet/sovereign-browser:dev .
#
# Chromium keeps its sandbox: the worker runs as a non-root user, and
# Chromium's sandbox then needs user namespaces, which Docker's default
# seccomp profile forbids. deploy/compose.yaml runs this image with
# deploy/chromium-seccomp.json (Docker's default profile plus clone, unshare,
# setns and chroot); see deploy/README.md.

# The build stage is the same in every Dockerfile here, so BuildKit builds
# the binary once for all five images. The context is the repository root
# (the Go workspace spans proto/ and services/*); .dockerignore keeps .git,
# bin/, data dirs, node_modules and local secrets out of it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY . .
# No cgo anywhere (SQLite is modernc.org/sqlite): a static binary that runs
# on distroless/static. `sovereign version` prints VERSION.
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/sovereign-fleet/sovereign/services/sovereign.Version=${VERSION}" -o /out/sovereign ./services/sovereign/cmd/sovereign
# The data dir of the stateful images and the gateway's workspace (system
# tools), owned by the runtime user.
RUN mkdir -p /out/data /out/workspace && chmod 0700 /out/data /out/workspace
# Only in this image: the Lighthouse runner of lighthouse_audit
# (services/browser/lighthouse), Lighthouse 12.8.2 and puppeteer-core as
# its package-lock.json pins them, fetched from the npm registry with
# Debian's npm (pure JavaScript, no install scripts). npm trusts the CA
# bundle go's module downloads trusted, kept before apt runs: installing
# npm may regenerate /etc/ssl/certs (a build stage whose bundle carries a
# local CA, as docker-offline.sh's stand-in golang image does, loses it).
# After the shared steps above, so the binary is still built once for all
# images.
RUN --mount=type=cache,target=/root/.npm \
    cp /etc/ssl/certs/ca-certificates.crt /tmp/go-ca.crt \
 && apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm \
 && cp -r services/browser/lighthouse /out/lighthouse \
 && cd /out/lighthouse \
 && NODE_EXTRA_CA_CERTS=/tmp/go-ca.crt npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error \
 && rm -rf /var/lib/apt/lists/*

FROM debian:bookworm-slim
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="sovereign-browser" \
      org.opencontainers.image.description="Sovereign browser worker: headless Chromium sessions served over NATS" \
      org.opencontainers.image.source="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.url="https://github.com/sovereign-fleet/sovereign" \
      org.opencontainers.image.vendor="sovereign-fleet" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
# Chromium, fonts for Latin, CJK and emoji pages (and fontconfig to index
# them at build time), CA certificates, tini as PID 1 so that Chromium's
# exited helpers are reaped, and Node.js (Debian 12's, >= 18.16) for the
# Lighthouse runner.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      chromium \
      chromium-headless-shell \
      fonts-liberation \
      fonts-noto-cjk \
      fonts-noto-color-emoji \
      fontconfig \
      ca-certificates \
      tini \
      nodejs \
 && rm -rf /var/lib/apt/lists/* \
 && fc-cache -f \
 && groupadd --gid 10001 sovereign \
 && useradd --uid 10001 --gid 10001 --home-dir /home/sovereign --create-home --shell /usr/sbin/nologin sovereign
COPY --from=build /out/sovereign /usr/local/bin/sovereign
COPY --from=build /out/lighthouse /opt/sovereign/lighthouse
# Chromium's profiles go to the temp dir (/tmp) and its caches and config
# under HOME: both may be tmpfs, so the root filesystem can be read-only.
# The worker passes --disable-dev-shm-usage (chromedp's default), so
# Chromium's shared memory also lives in /tmp.
ENV HOME=/home/sovereign \
    XDG_CONFIG_HOME=/home/sovereign/.config \
    XDG_CACHE_HOME=/home/sovereign/.cache \
    TMPDIR=/tmp \
    SOVEREIGN_CHROME=/usr/lib/chromium/chromium-headless-shell \
    SOVEREIGN_LIGHTHOUSE_DIR=/opt/sovereign/lighthouse \
    SOVEREIGN_BROWSER_LISTEN=0.0.0.0:8091 \
    SOVEREIGN_LOG_FORMAT=json
# /healthz, /readyz, /metrics (the worker talks to nothing else but NATS).
EXPOSE 8091
USER 10001:10001
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sovereign", "browser"]
