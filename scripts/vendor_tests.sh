#!/usr/bin/env bash
# Fetch the test suites of framework releases that statecore's integrations are checked against.
# They come from the package registry's sdists at setup time (pinned to the same version as the
# extra), cached under .cache/vendor/, so no test downloads anything when it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
openai_agents_version="0.24.0"
dest=".cache/vendor/openai-agents-${openai_agents_version}"
if [ ! -d "$dest/tests/memory" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    --dest "$tmp" "openai-agents==${openai_agents_version}"
  mkdir -p "$dest"
  tar -xzf "$tmp"/openai_agents-"${openai_agents_version}".tar.gz -C "$tmp"
  cp -r "$tmp/openai_agents-${openai_agents_version}/tests" "$dest/tests"
fi
