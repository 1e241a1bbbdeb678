"""The public face: what `import statecore` offers, and what it costs to import."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import statecore
import statecore.errors
from tests import public_stub


def test_all_lists_exactly_the_exports_and_the_version() -> None:
    assert set(statecore.__all__) == set(statecore._EXPORTS) | {"__version__"}
    assert len(statecore.__all__) == len(set(statecore.__all__))


def test_the_face_names_each_export_once() -> None:
    """statecore/__init__.py lists a name once (its table); the error tree's names only in
    statecore.errors."""
    source = Path(statecore.__file__).read_text()
    for name in statecore._EXPORTS:
        assert source.count(f'"{name}"') <= 1, name
    errors = set(statecore.errors.__all__) - {"ERRORS_BY_CODE"}
    assert errors <= set(statecore._EXPORTS)
    assert not any(f'"{name}"' in source for name in errors)


def test_the_type_checkers_stub_is_current() -> None:
    assert public_stub.STUB.read_text() == public_stub.render(), (
        "statecore/__init__.pyi is stale: run python -m tests.public_stub"
    )


@pytest.mark.parametrize("name", sorted(statecore._EXPORTS))
def test_every_export_resolves_to_the_object_its_module_defines(name: str) -> None:
    module = importlib.import_module(statecore._EXPORTS[name])
    assert getattr(statecore, name) is getattr(module, name)


def test_version_is_the_installed_distributions() -> None:
    assert statecore.__version__ == importlib.metadata.version("statecore")


def test_dir_lists_the_exports() -> None:
    assert set(statecore._EXPORTS) <= set(dir(statecore))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        statecore.Nope  # noqa: B018


def _modules_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after running ``code``."""
    listing = "import sys, json; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    probe = code + "\n" + listing
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


FRAMEWORKS = {"openai", "agents", "langgraph", "langchain_core"}


def test_importing_statecore_loads_neither_temporal_nor_sql_nor_a_framework() -> None:
    loaded = _modules_after("import statecore")
    assert not loaded & ({"temporalio", "sqlalchemy", "tiktoken"} | FRAMEWORKS)


@pytest.mark.parametrize(
    "code",
    [
        "from statecore import open_store, Message",
        "import statecore.store",
        "from statecore import SessionRef, StateStore, StatecoreError",
    ],
)
def test_the_store_alone_loads_no_temporal(code: str) -> None:
    loaded = _modules_after(code)
    assert "temporalio" not in loaded
    assert not loaded & FRAMEWORKS


def test_the_plugin_loads_no_framework() -> None:
    loaded = _modules_after("from statecore import StatecorePlugin, AgentSessionClient")
    assert "temporalio" in loaded
    assert not loaded & FRAMEWORKS
