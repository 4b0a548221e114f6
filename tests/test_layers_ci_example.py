"""examples/layers-ci.yml, the CI recipe of docs/layers.md, as it stands: a workflow that parses,
whose matrix plans (its two sides on this interpreter), and whose every `python -m runner`
command is one the runner takes. What its gate does on two sides of a real run:
tests/worker/test_layers_run.py (the same compare command, a planted slowdown and a side within
noise)."""

from __future__ import annotations

import re
import shlex
import sys
import textwrap

import yaml

from runner import cli
from runner.paths import REPO_ROOT

WORKFLOW = REPO_ROOT / "examples" / "layers-ci.yml"


def steps() -> list[dict]:
    document = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    (job,) = document["jobs"].values()
    assert document["env"]["THRESHOLD"] == "10%"
    return job["steps"]


def script(name: str) -> str:
    return next(step["run"] for step in steps() if step.get("name", "").startswith(name))


def test_the_workflows_matrix_plans_both_sides(tmp_path, run_cli):
    body = script("The matrix")
    toml = textwrap.dedent(body[body.index("<<EOF") + 5:body.rindex("EOF")]).strip()
    toml = toml.replace("$BACKEND", "torch")
    toml = re.sub(r'python = "env-(base|pr)/bin/python"', f'python = "{sys.executable}"', toml)
    matrix = tmp_path / "layers-ci.toml"
    matrix.write_text(toml + "\n", encoding="utf-8")
    code, out, err = run_cli(matrix, "--dry-run")
    assert code == 0, err
    cells = [line for line in out.splitlines() if line.startswith("layer-")]
    assert len(cells) == 20                      # 5 layers × 2 phases × 2 sides
    assert "60 runs to do, 0 done, 0 not applicable" in out      # 3 repeats each


def test_every_runner_command_of_the_workflow_is_one_the_runner_takes():
    commands = []
    for step in steps():
        text = step.get("run", "").replace("\\\n", " ")
        for line in text.splitlines():
            if "-m runner" in line:
                words = shlex.split(line.replace('"$run"', "RUN").replace('"$THRESHOLD"', "10%"))
                commands.append(words[words.index("runner") + 1:])
    assert [c[0] for c in commands] == ["layers-ci.toml", "compare"]
    for words in commands:
        command = words.pop(0) if words[0] in cli.SUBCOMMANDS else "run"
        args = cli.build_parser(command).parse_args(words)
        if command == "compare":
            assert args.fail_on_regression == 0.10 and args.environments == ["base", "pr"]
