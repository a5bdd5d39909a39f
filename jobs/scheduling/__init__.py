"""The pure scheduling core of Tidepool: standard library only, the clock passed in."""

from __future__ import annotations
