"""A session's default context budget follows its model's window (a table of common models;
a model client may state its own), and an explicit ``profile.max_tokens`` wins."""

from __future__ import annotations

import pytest

from statecore.core._errors import InvalidLimitError
from statecore.core._limits import DEFAULT_CONTEXT_BUDGET, MAX_REPLY_RESERVE
from statecore.core._model_windows import context_budget, context_window_for
from statecore.llm._offline import OfflineModel
from statecore.llm._openai_compat import OpenAICompatibleModel


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-turbo-preview", 128_000),
        ("openai:gpt-4.1-mini", 1_047_576),
        ("meta-llama/llama-3.1-8b-instruct", 131_072),
        ("GPT-3.5-TURBO", 16_385),
        ("my-own-model", None),
    ],
)
def test_the_longest_matching_name_gives_the_window(name: str, window: int | None) -> None:
    assert context_window_for(name) == window


def test_the_budget_is_the_profile_s_or_the_window_less_the_reply_s_room() -> None:
    assert context_budget(1000, 128_000) == 1000
    assert context_budget(None, 128_000) == 128_000 - MAX_REPLY_RESERVE
    assert context_budget(None, 8_000) == 6_000
    assert context_budget(None, None) == DEFAULT_CONTEXT_BUDGET


def test_model_clients_state_their_windows() -> None:
    assert OfflineModel.context_window == 128_000
    looked_up = OpenAICompatibleModel("http://127.0.0.1:1/v1", model="gpt-4o")
    assert looked_up.context_window == 128_000
    unknown = OpenAICompatibleModel("http://127.0.0.1:1/v1", model="house-model")
    assert unknown.context_window is None
    told = OpenAICompatibleModel(
        "http://127.0.0.1:1/v1", model="house-model", context_window=32_000
    )
    assert told.context_window == 32_000
    with pytest.raises(InvalidLimitError):
        OpenAICompatibleModel("http://127.0.0.1:1/v1", model="m", context_window=0)
