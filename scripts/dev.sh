#!/usr/bin/env bash
# Set up and run statecore locally: an embedded Temporal dev server (Web UI on
# http://localhost:8233), a SQLite database under .statecore/, the offline model, and a worker.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev-server
exec .venv/bin/python worker.py --dev "$@"
