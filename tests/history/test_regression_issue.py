"""`history regressions --issue`: each run that made a cell slower gets an issue.md in its folder,
that run against the run before it in the cell's series (results/render/issue.py)."""

from __future__ import annotations

from tests.history.runs import write_run


def test_a_new_slowdown_writes_its_issue_into_the_run_that_made_it(history, tmp_path):
    folders = [write_run(tmp_path, "nightly", i, level=1.25 if i >= 8 else 1.0, noise=0.02,
                         seed=i) for i in range(12)]
    for folder in folders:
        history("import", folder)
    code, out, _ = history("regressions", "--cell", "cnn-fit-keras-jax-b128", "--issue")
    assert code == 1 and f"issue: {folders[8] / 'issue.md'}" in out.replace("\n", "")
    text = (folders[8] / "issue.md").read_text()
    title = text.splitlines()[0]
    assert title.startswith("# keras 3.15.1: cnn (fit) on keras-jax 1.2") and "× slower (" in title
    assert "run nightly/20260108T000000Z | 2026-01-09, run nightly/20260109T000000Z |" in text
    assert "- cnn-fit-keras-jax-b128: a change point of the history, 1.2" in text
    assert str(tmp_path) not in text
    assert not any((f / "issue.md").exists() for f in folders[:8] + folders[9:])
