"""The host's install fits beside an existing scientific Python stack: what `pip install .`
brings (the installed metadata of the runner's core requirements, followed recursively) holds
no cloud SDK and no database driver, and nothing in it pins NumPy or SciPy to one version."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution

from packaging.requirements import Requirement

SHARED = {"numpy", "scipy"}                 # what users' environments already hold
HEAVY = re.compile(r"^(google-|azure-|boto|grpcio|slack|pg8000|psycopg|apache-otava)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def core_tree(root: str = "dl-bench-runner") -> dict[str, list[Requirement]]:
    """Every distribution the core install pulls in → the requirements naming it."""
    seen: dict[str, list[Requirement]] = {}
    todo = [root]
    while todo:
        try:
            requires = distribution(todo.pop()).requires or []
        except PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue                    # an extra's, or another platform's
            name = canonical(requirement.name)
            if name not in seen:
                todo.append(name)
            seen.setdefault(name, []).append(requirement)
    return seen


def test_the_core_install_has_no_cloud_sdk_and_no_database_driver():
    tree = core_tree()
    assert "ruptures" in tree and "numpy" in tree          # the walk did read the metadata
    assert not [name for name in tree if HEAVY.match(name)], sorted(tree)


def test_nothing_pins_numpy_or_scipy_exactly():
    for name, requirements in core_tree().items():
        if name in SHARED:
            for requirement in requirements:
                exact = [s for s in requirement.specifier if s.operator in ("==", "===")]
                assert not exact, f"{requirement} pins {name}"


def test_the_postgresql_driver_is_an_extra_the_tests_install():
    requires = [Requirement(line) for line in distribution("dl-bench-runner").requires or []]
    extras = {(canonical(r.name), str(r.marker)) for r in requires if r.marker}
    assert any(name == "psycopg" and "postgres" in marker for name, marker in extras)
    assert any(name == "dl-bench-runner" and "test" in marker for name, marker in extras)
