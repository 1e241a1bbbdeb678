"""bench/worker_threads.py reads a process's CPU per thread from /proc and groups it the way
its table does: the main (event loop) thread, the Temporal core's tokio threads, the
workflow threads, everything else."""

from __future__ import annotations

import os
import threading
import time

from bench.worker_threads import GROUPS, group_of, per_turn, thread_cpu


def test_threads_are_grouped_by_their_names() -> None:
    assert group_of(True, "python") == "event loop"
    assert group_of(False, "tokio-rt-worker") == "temporal core"
    assert group_of(False, "workflow-proces") == "workflow"
    assert group_of(False, "python") == "other"


def test_cpu_spent_on_another_thread_lands_in_other() -> None:
    before = thread_cpu(os.getpid())
    spun, release = threading.Event(), threading.Event()

    def spin() -> None:
        # 200 ms of this thread's own CPU, however busy the machine is.
        while time.thread_time() < 0.2:
            pass
        spun.set()
        release.wait(10)  # an ended thread leaves /proc: stay until it has been read

    worker = threading.Thread(target=spin)
    worker.start()
    assert spun.wait(30)
    after = thread_cpu(os.getpid())
    release.set()
    worker.join()
    spent = per_turn(before, after, turns=1)
    assert set(spent) == set(GROUPS)
    assert spent["other"] >= 150  # ms, in clock ticks of 10 ms
    assert spent["temporal core"] == 0
