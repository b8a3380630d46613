// Package deploy holds the container images (docker/*.Dockerfile) and the
// docker compose project (compose.yaml) of Sovereign, and the tests that
// validate them with the libraries docker itself uses: compose-go loads the
// project as `docker compose` does, BuildKit's parser reads the Dockerfiles.
package deploy
