"""The practical threshold `compare` judges a change against, and where it comes from."""

from __future__ import annotations

from collections.abc import Callable

from ...machine.profile import compare_threshold
from ..data.types import Manifest

DEFAULT_THRESHOLD = 0.05


def choose_threshold(given: float | None, manifest_a: Manifest,
                     manifest_b: Manifest) -> tuple[Callable[[str | None], float], str]:
    """The practical threshold per workload class, and where it comes from: --threshold when
    given; else, when both runs ran on machines with a profile (`runner doctor --measure`), the
    larger of the two machines' thresholds for the class; else the fixed DEFAULT_THRESHOLD."""
    if given is not None:
        return (lambda workload: given), f"--threshold {given * 100:g} %"
    profiles = [m.get("machine_profile") for m in (manifest_a, manifest_b)]
    missing = [side for side, p in zip("AB", profiles, strict=True) if not (p or {}).get("found")]
    if missing:
        return ((lambda workload: DEFAULT_THRESHOLD),
                f"the fixed {DEFAULT_THRESHOLD * 100:g} %: run {' and '.join(missing)} ran on a "
                "machine without a profile (python -m runner doctor --measure MATRIX)")
    return ((lambda workload: compare_threshold(profiles[0], profiles[1], workload,
                                                DEFAULT_THRESHOLD)[0]),
            "the machine profiles (the larger of A's and B's, per workload class)")
