"""Executors registered by kind (runner/executors/kinds.py): a kind registered once is offered by
the CLI, made by its kind and read by its flags, with no other edit; a kind not registered is
refused in one line."""

from __future__ import annotations

import pytest

from runner import cli
from runner.environments import Flavour
from runner.errors import UsageError
from runner.executors import kinds
from runner.executors.base import Executor
from runner.executors.local import LocalExecutor
from runner.run.setup import choose_setup


class ToyExecutor(Executor):
    name = "toy"
    runs_images = True
    on_this_host = False

    def __init__(self, flavour: Flavour | None = None, gpu: bool = False) -> None:
        self.flavour = flavour or Flavour("cpu", "toy")
        self.gpu = gpu


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(kinds.REGISTRY, "toy", kinds.Kind("toy", __name__, "ToyExecutor"))


def test_the_shipped_kinds_are_registered_in_order():
    assert kinds.choices() == ("auto", "local", "docker", "ray")
    assert kinds.executor_class("local") is LocalExecutor
    assert [k for k in kinds.REGISTRY if kinds.runs_images(k)] == [kinds.IMAGE_KIND]


def test_a_toy_kind_registered_once_is_offered_made_and_read_by_its_flags(toy):
    assert kinds.choices()[-1] == "toy"
    executor = kinds.create("toy", Flavour("cuda", "given"), gpu=True)
    assert isinstance(executor, ToyExecutor) and executor.gpu and executor.flavour.name == "cuda"
    assert kinds.runs_images("toy") and not kinds.executor_class("toy").on_this_host
    args = cli.build_parser("run").parse_args(["matrix.toml", "--executor", "toy"])
    assert args.executor == "toy"
    setup = choose_setup(None, "toy")
    assert isinstance(setup.executor, ToyExecutor) and setup.reason == "--executor toy"


def test_a_kind_not_registered_is_refused_in_one_line():
    with pytest.raises(ValueError, match="executor 'nope' is not one of local, docker, ray"):
        kinds.create("nope", Flavour("cpu", ""), gpu=False)
    assert not kinds.runs_images("nope") and not kinds.runs_images(kinds.AUTO)
    with pytest.raises(UsageError, match=r"'nope' is not available \(use auto, local, docker "
                                         r"or ray\)"):
        choose_setup(None, "nope")
