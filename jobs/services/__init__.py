"""Writes to workloads: submit, cancel, scale, the cycle's apply step, backend sync, rules."""
