#!/usr/bin/env bash
# Regenerate requirements.lock: every package the worker image installs (statecore's
# dependencies with the postgres, otel, encryption and openai extras, and its build backend), pinned
# with hashes for Linux x86_64 / Python 3.11. The Dockerfile installs exactly this file;
# tests/test_deploy_files.py checks it still satisfies pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/uv pip compile pyproject.toml scripts/compose/build-requirements.in \
  --extra postgres --extra otel --extra encryption --extra openai \
  --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
  --generate-hashes --no-header --quiet -o requirements.lock
