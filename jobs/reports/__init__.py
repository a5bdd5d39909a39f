"""Reports from running workloads: per-attempt tokens, the report endpoint, coalesced writes.

A replica's pod gets ``TIDEPOOL_REPORT_URL`` and ``TIDEPOOL_REPORT_TOKEN`` (``env``); its code
POSTs progress, checkpoints, heartbeats and activity (``tidepool.report``). ``accept`` checks
the token and the body and keeps the last value of each signal per replica in this process's
buffer (``buffer``); a flusher thread writes what the buffer holds every
``TIDEPOOL_REPORT_FLUSH_SECONDS`` in a few bulk, conditional statements (``flush``), then
reads which attempts are live (``live``), so most reports need no query.
"""
