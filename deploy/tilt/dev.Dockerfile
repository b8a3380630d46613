# Development image for Tilt: the sovereign binary built on the host
# (.tilt/sovereign, by the Tiltfile's local_resource), on a Debian base with
# a shell, so that Tilt's restart_process can restart it after a live update.
# Stage browser adds Chromium; stage service is gateway, signer, history and
# the agent.
# Never ship it: deploy/docker/*.Dockerfile are the release images.
FROM debian:bookworm-slim AS base
RUN useradd --uid 10001 --create-home --home-dir /home/sovereign sovereign \
 && mkdir -p /data /app && chown 10001:10001 /data /app
ENV SOVEREIGN_DATA_DIR=/data

FROM base AS browser
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation fonts-noto-color-emoji ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV SOVEREIGN_CHROME=/usr/bin/chromium
COPY --chown=10001:10001 sovereign /app/sovereign
USER 10001:10001
ENTRYPOINT ["/app/sovereign", "browser"]

FROM base AS service
COPY --chown=10001:10001 sovereign /app/sovereign
USER 10001:10001
ENTRYPOINT ["/app/sovereign"]
