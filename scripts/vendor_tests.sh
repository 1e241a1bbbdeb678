#!/usr/bin/env bash
# Fetch the test suites and examples of framework releases that statecore's integrations are
# checked against. They come from the package registry's sdists at setup time (pinned to the
# same version as the extra), cached under .cache/vendor/, so no test downloads anything when
# it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
openai_agents_version="0.24.0"
dest=".cache/vendor/openai-agents-${openai_agents_version}"
if [ ! -d "$dest/tests/memory" ] || [ ! -d "$dest/examples/memory" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    --dest "$tmp" "openai-agents==${openai_agents_version}"
  tar -xzf "$tmp"/openai_agents-"${openai_agents_version}".tar.gz -C "$tmp"
  src="$tmp/openai_agents-${openai_agents_version}"
  mkdir -p "$dest/examples"
  rm -rf "$dest/tests" "$dest/examples/memory"
  cp -r "$src/tests" "$dest/tests"
  # The session examples, and the two modules of examples/ they import.
  cp -r "$src/examples/memory" "$dest/examples/memory"
  cp "$src/examples/__init__.py" "$src/examples/auto_mode.py" "$dest/examples/"
fi
