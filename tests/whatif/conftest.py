"""What-if fixtures: a recorded window of the demo cluster, recorded once per session."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from console import clock as clock_module
from jobs.backends import set_backend
from whatif.replay.types import Recording

# Monday 06:00: two hours of training, then the 08:00 scale-up of the inference service takes
# its GPUs back by child-level preemption.
START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
HOURS = 3.0
_recordings: list[Recording] = []


@pytest.fixture
def recorded(db: None) -> Iterator[Recording]:
    """Three hours of the demo, recorded by the real control loop, read back as a Recording.

    The Recording is plain data, so the first test to ask records it and the rest reuse it.
    """
    from whatif.history import demo_history_record
    from whatif.recording import record_window

    if not _recordings:
        previous = clock_module.get_clock()
        try:
            end = demo_history_record(start=START, hours=HOURS)
            _recordings.append(record_window(START, end))
        finally:
            clock_module.set_clock(previous)
            set_backend(None)
    yield _recordings[0]
