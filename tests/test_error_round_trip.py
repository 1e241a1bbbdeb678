"""Every statecore error is importable from ``statecore`` and comes back as its class from
the Temporal failure that carried it (``statecore.errors.from_failure``).

The same round trip through a real dev server (an activity's refusal in workflow code, and
an update's failure in a client) is tests/temporal/test_turn_control.py."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

import statecore
from statecore.errors import ERRORS_BY_CODE, StatecoreError, from_failure
from tests.catalog.bad_inputs import ENTRIES

CODES = sorted(ERRORS_BY_CODE)


def test_the_catalog_codes_are_all_covered() -> None:
    assert {e.code for e in ENTRIES} <= set(CODES)


@pytest.mark.parametrize("code", CODES)
def test_every_error_class_is_exported_from_statecore(code: str) -> None:
    cls = ERRORS_BY_CODE[code]
    assert getattr(statecore, cls.__name__) is cls
    assert cls.__name__ in statecore.__all__


def _activity_error(cause: BaseException) -> ActivityError:
    err = ActivityError(
        "activity task failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type="statecore.commit_turn",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    err.__cause__ = cause
    return err


@pytest.mark.parametrize("code", CODES)
def test_a_failure_comes_back_as_its_class_through_every_wrapping(code: str) -> None:
    cls = ERRORS_BY_CODE[code]
    app = ApplicationError(f"refused: {code}", {"share_id": "abc"}, type=code)
    in_workflow = _activity_error(app)  # what workflow code catches
    in_client = WorkflowUpdateFailedError(in_workflow)  # an update that let it through
    in_client.__cause__ = in_workflow
    for failure in (app, in_workflow, in_client):
        error = from_failure(failure)
        assert type(error) is cls, (code, failure)
        assert error is not None
        assert error.message == f"refused: {code}" and error.code == code
        assert error.details == {"share_id": "abc"}
    # Raised again from workflow code, chained to the activity's failure.
    try:
        try:
            raise in_workflow
        except ActivityError as err:
            raise RuntimeError("the handler gave up") from err
    except RuntimeError as outer:
        assert type(from_failure(outer)) is cls


@pytest.mark.parametrize("code", CODES)
def test_a_failed_query_comes_back_as_its_class(code: str) -> None:
    error = from_failure(WorkflowQueryFailedError(f"{code}: the session is busy"))
    assert type(error) is ERRORS_BY_CODE[code]
    assert error is not None and error.message == "the session is busy"


def test_what_is_not_a_statecore_failure_gives_none() -> None:
    assert from_failure(ApplicationError("boom", type="SomethingElse")) is None
    assert from_failure(_activity_error(ApplicationError("boom"))) is None
    assert from_failure(ValueError("plain")) is None
    assert from_failure(WorkflowQueryFailedError("no code here")) is None
    same = StatecoreError("already typed")
    assert from_failure(same) is same


def test_details_that_are_not_a_mapping_are_left_out() -> None:
    error = from_failure(ApplicationError("x", "just text", 3, type="VersionConflict"))
    assert type(error) is statecore.VersionConflictError
    assert error is not None and error.details == {}


def test_the_errors_page_lists_every_code_with_its_class() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text()
    for code, cls in ERRORS_BY_CODE.items():
        assert f"| `{code}` | `{cls.__name__}` |" in page, code
