"""channels_redis's channel layer, with one reader for the process's sockets.

The stock layer has every socket's consumer wait on the process's Redis list in turn: each
message wakes all of them, each makes and cancels two tasks, and the next read waits for the
lock to pass. With 75 sockets in a web process that was milliseconds per message, and under
a burst of submits the pushes queued for seconds. Here one task per process reads the list
and hands each message to the queues of the sockets it names, which simply wait on theirs.
Messages, capacity, expiry and groups are channels_redis's own; a failure to read (Redis
down) is raised in every waiting socket's receive, as the stock layer raises it in one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels_redis.core import RedisChannelLayer as StockRedisChannelLayer


class RedisChannelLayer(StockRedisChannelLayer):  # type: ignore[misc]
    """The Redis layer whose process-local channels are fed by one reader task."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reader: asyncio.Task[None] | None = None

    async def receive(self, channel: str) -> Any:
        """The channel's next message; channels of this process wait on the reader."""
        if "!" not in channel:
            return await super().receive(channel)
        assert self.require_valid_channel_name(channel)
        queue = self.receive_buffer[channel]
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read(self.non_local_name(channel)))
        try:
            message = await queue.get()
        except asyncio.CancelledError:
            self.receive_buffer.pop(channel, None)  # its consumer has ended
            raise
        if isinstance(message, BaseException):
            raise message
        return message

    async def _read(self, local: str) -> None:
        """Hand every message of the process's list to the queues of its channels."""
        try:
            while True:
                channels, message = await self.receive_single(local)
                for name in channels if isinstance(channels, list) else [channels]:
                    self.receive_buffer[name].put_nowait(message)
        except Exception as error:  # every waiting socket fails with it, and retries
            for queue in list(self.receive_buffer.values()):
                queue.put_nowait(error)
