"""The Ray executor's messages (runner/executors/ray_messages.py), typed, without a cluster: a
cell's request goes through pickling (as Ray sends it) to the node's side, which runs it with
its own executor on this host, and its reply back to the driver's side, which leaves the
worker's result where a local run would; the host then reads it as it reads any other."""

from __future__ import annotations

import pickle
import sys
from types import SimpleNamespace

from runner.environments import Source
from runner.executors.base import Attempt, write_spec
from runner.executors.ray import RayExecutor
from runner.executors.ray_messages import CellReply, CellRequest, PrepareReply, PrepareRequest
from runner.executors.ray_node import prepare_on_node, run_here
from runner.results.data.records import read_worker_result
from tests.executors.attempts import cell_spec


def sent(message):
    """What the other side receives: Ray pickles a task's arguments and return values."""
    return pickle.loads(pickle.dumps(message))


def test_a_cell_goes_to_a_node_and_its_result_comes_back_typed(tmp_path):
    source = Source(python=sys.executable)
    prepared = sent(prepare_on_node(sent(PrepareRequest(source, {}, "local"))))
    assert prepared == PrepareReply(None, [])
    spec = cell_spec(steps=2)
    request = CellRequest(spec=spec, source=source, locks={}, env={}, timeout=120,
                          wants_gpu=False, node_executor="local")
    reply = sent(run_here(sent(request), {"node_name": "node-1"}))
    assert isinstance(reply, CellReply) and reply.error is None, reply
    assert reply.outcome.returncode == 0 and reply.result is not None
    assert reply.metadata["node_name"] == "node-1" and reply.metadata["node_executor"] == "local"

    (tmp_path / "work").mkdir()
    attempt = Attempt(spec=spec, work_dir=tmp_path / "work", log_path=tmp_path / "log", env={},
                      timeout=120)
    write_spec(attempt)
    outcome = RayExecutor.received(SimpleNamespace(name="ray"), reply, attempt, 0.0)
    assert outcome.returncode == 0 and attempt.placement["executor"] == "ray"
    result = read_worker_result(attempt.result_path, spec)
    assert isinstance(result, dict) and result["status"] == "ok", result
    assert len(result["samples_ms"]) == 2 and result["cell_id"] == spec.cell_id


def test_a_node_that_cannot_prepare_says_why_and_runs_nothing(tmp_path):
    source = Source(folder="numpy")
    reply = sent(prepare_on_node(sent(PrepareRequest(source, {"cpu": "0" * 64}, "local"))))
    assert reply.error and "the driver's has 000000000000" in reply.error
