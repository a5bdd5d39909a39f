"""The what-if replay as a Celery task (the distributed mode)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="whatif.tasks.whatif_run")
def whatif_run(whatif_id: int) -> str:
    """Replay one queued what-if; returns its status."""
    from whatif.services import whatif_run as run

    done = run(whatif_id=whatif_id)
    return done.status if done else "skipped"
