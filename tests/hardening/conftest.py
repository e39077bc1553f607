"""Hypothesis profile for the hardening corpus: a fixed seed and bounded example counts."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# derandomize: the same examples every run (CI stays reproducible and fast); no example
# database, so a local run cannot make CI's corpus differ.
settings.register_profile(
    "hardening",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.load_profile("hardening")
