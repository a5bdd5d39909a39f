"""Tidepool's library for code that runs in a Tidepool workload (standard library only)."""
