"""How often one chat turn's data is checked and encoded on its way from the client to SQL,
and which of statecore's files it passes through.

``count_checks(text, turn_id)`` wraps, for as long as it is open, the one rule for message
text (``validate_text``, wherever a module bound it), the turn-id rule and the JSON encoders
the path uses (pydantic's ``model_dump_json`` and ``to_json``, the standard ``json.dumps``),
and counts the calls that carry this turn's text or id. Run the worker unsandboxed while it
counts: the sandbox would import its own copies of the modules, out of the wrappers' reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pydantic
import pydantic_core

from statecore.core import _identifiers, _models


@contextlib.contextmanager
def count_checks(text: str, turn_id: str) -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()
    #: Where each count was made: the innermost statecore (or temporalio) frame's place.
    places: Counter[str] = Counter()

    def note(what: str) -> None:
        counts[what] += 1
        frames = [
            f"{f.filename.split('site-packages/')[-1].split('/main/')[-1]}:{f.lineno} {f.name}"
            for f in traceback.extract_stack()[:-2]
            if "statecore/" in f.filename or "temporalio/" in f.filename
        ]
        places[f"{what} @ " + " < ".join(reversed(frames[-3:]))] += 1

    counts.places = places  # type: ignore[attr-defined]
    undo: list[Callable[[], None]] = []

    def swap(owner: Any, name: str, new: Any) -> None:
        old = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, new)
        undo.append(lambda: setattr(owner, name, old))

    real_validate_text = _models.validate_text

    def validate_text(value: Any, *args: Any, **kwargs: Any) -> str:
        if value == text:  # the user's line, not a reply that quotes it
            note("text validated")
        return real_validate_text(value, *args, **kwargs)

    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if name.startswith("statecore") and getattr(module, "validate_text", None) is (
            real_validate_text
        ):
            swap(module, "validate_text", validate_text)

    rule = _identifiers.IDENTIFIER_KINDS["turn_id"]
    real_check = rule.check

    class CountingRule(type(rule)):  # type: ignore[misc]
        def check(self, value: Any, what: str) -> str:
            if value == turn_id:
                note("turn_id checked")
            return real_check(value, what)

    counting_rule = CountingRule(**{f: getattr(rule, f) for f in rule.__dataclass_fields__})
    _identifiers.IDENTIFIER_KINDS["turn_id"] = counting_rule
    undo.append(lambda: _identifiers.IDENTIFIER_KINDS.__setitem__("turn_id", rule))

    # The line as a JSON string of its own, not inside a reply that quotes it.
    quoted = json.dumps(text)

    def counted(encode: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = encode(*args, **kwargs)
            raw = out if isinstance(out, bytes | str) else b""
            needle = quoted if isinstance(raw, str) else quoted.encode()
            if needle in raw:  # type: ignore[operator]
                note("JSON encodings")
            return out

        return wrapper

    swap(pydantic.BaseModel, "model_dump_json", counted(pydantic.BaseModel.model_dump_json))
    swap(json, "dumps", counted(json.dumps))
    # Temporal's pydantic converter bound ``to_json`` when it was imported.
    converter = sys.modules.get("temporalio.contrib.pydantic")
    if converter is not None:
        swap(converter, "to_json", counted(pydantic_core.to_json))
    try:
        yield counts
    finally:
        for step in reversed(undo):
            step()


@contextlib.asynccontextmanager
async def files_entered(workflow_thread: ThreadPoolExecutor) -> AsyncIterator[set[str]]:
    """The statecore files (repository paths) whose code runs while the block is open, on
    this thread and on ``workflow_thread`` (a one-thread executor the worker runs its
    workflow activations on): with the worker in this process and unsandboxed, the files a
    turn enters."""
    entered: set[str] = set()
    marker = "/statecore/"

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            at = name.rfind(marker)
            if at >= 0:
                entered.add("statecore/" + name[at + len(marker) :])

    loop = asyncio.get_running_loop()
    previous = sys.getprofile()
    await loop.run_in_executor(workflow_thread, sys.setprofile, profile)
    sys.setprofile(profile)
    try:
        yield entered
    finally:
        sys.setprofile(previous)
        await loop.run_in_executor(workflow_thread, sys.setprofile, None)
