"""A user's workload file through the Docker executor: the container reads the code from a
read-only mount. Apart from tests/schema/test_user_workloads.py so that the engine's group
(tests/conftest.py: the Docker modules one at a time on one pytest worker) holds this
test alone, not the local runs beside it."""

from __future__ import annotations

import pytest

from tests.schema.test_user_workloads import STEP, only_run, records, user_matrix, workload_file


@pytest.mark.docker
@pytest.mark.slow
def test_a_user_workload_through_docker_reads_its_code_from_a_read_only_mount(
        engine, numpy_image, base_env, tmp_path, run_cli, results_dir):
    workload_file(tmp_path / "bench", STEP + '''
import os

def answer(spec, output):
    return {"writable": float(os.access(__file__, os.W_OK)), "output": float(output.sum())}
''')
    path = user_matrix(tmp_path, 'file = "bench/bench.py"\ntasks = ["run"]\noptions = { n = 8 }\n',
                       run="[run]\nname = 'd'\nrepeats = 1\nsteps = 3\nprofile = 'full'\n")
    code, out, err = run_cli(path, "--executor", "docker")
    assert code == 0, out + err
    record = records(only_run(results_dir, "d"))["w"]
    assert record["status"] == "ok" and record["metadata"]["executor"] == "docker"
    assert record["answer"] == {"writable": 0.0, "output": 8 * 8 * 8 * 0.25}
