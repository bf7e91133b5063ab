#!/bin/sh
# The image's entrypoint (deploy/Dockerfile): `autograder` with the given arguments, after turning
# secrets given as files (compose's /run/secrets, Kubernetes' secret volumes) into the
# environment variables that read them: NAME_FILE=path gives NAME=the file's content. A named
# file that cannot be read stops the container here, saying which.
set -eu
if [ -n "${PGPASSWORD_FILE:-}" ]; then
    # libpq (PostgreSQL's client) reads PGPASSWORD: the database URL carries no password.
    PGPASSWORD="$(cat "$PGPASSWORD_FILE")"
    export PGPASSWORD
fi
if [ -n "${AUTOGRADER_SERVE_METRICS_TOKEN_FILE:-}" ]; then
    AUTOGRADER_SERVE_METRICS_TOKEN="$(cat "$AUTOGRADER_SERVE_METRICS_TOKEN_FILE")"
    export AUTOGRADER_SERVE_METRICS_TOKEN
fi
exec autograder "$@"
