"""Real CPU runs: a matrix that varies jit (elementwise on JAX and torch), options.n (matmul) and
precision with 3 repeats shows the findings, the effects tables and the forest plot in
report.md and in report.html (opened in headless Chromium); an environment that cuts corners
(the selftest's shortcut) is marked "different answer" and loses "best"."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from runner import cli
from runner.paths import RESULTS_DIR
from tests.matrices import environment, matrix_text

pytestmark = pytest.mark.slow
ARTIFACTS = RESULTS_DIR / "test-artifacts"

EFFECTS_MATRIX = matrix_text(
    "effects", repeats=3, steps=5, executor="local", environments=["numpy", "jax", "torch"],
    benchmarks=[{"workload": "elementwise", "environments": ["jax", "torch"], "jit": [False, True],
                 "options": {"n": 16384}},
                {"workload": "matmul", "environments": ["numpy", "jax"],
                 "precision": ["float32", "bfloat16"], "options": {"n": [64, 128]}}])


def run_matrix(folder: Path, text: str, name: str) -> Path:
    matrix = folder / "matrix.toml"
    matrix.write_text(text, encoding="utf-8")
    code = cli.main([str(matrix), "--results-dir", str(folder / "results")])
    (run,) = (folder / "results" / name).iterdir()
    records = [json.loads(p.read_text()) for p in (run / "cells").glob("*.json")]
    failed = {r["cell_name"]: r["error"] for r in records
              if r["status"] not in ("ok", "not_applicable")}
    assert code == 0 and not failed, failed
    return run


@pytest.fixture(scope="module")
def effects_run(tmp_path_factory) -> Path:
    return run_matrix(tmp_path_factory.mktemp("effects"), EFFECTS_MATRIX, "effects")


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n")[1].split("\n## ")[0]


def test_the_report_opens_with_findings_and_shows_every_effect(effects_run):
    text = (effects_run / "report.md").read_text(encoding="utf-8")
    assert text.index("## Findings") < text.index("## Time per step") \
        < text.index("## Effects") < text.index("## Different answers")
    findings = section(text, "Findings")
    # With 3 repeats every ratio has an interval: each sentence carries one.
    jit_jax = next(line for line in findings.splitlines()
                   if line.startswith("- jit = true against false") and "on jax" in line)
    assert re.search(r"× (faster|slower) \(95 % CI [^()–]+–[^()–]+\)", jit_jax), jit_jax
    assert "no interval" not in findings
    # 8 cells share a row with another environment; the 2 bfloat16 matmuls run on JAX alone.
    assert "All 8 cells compared computed the same answer" in findings

    effects = section(text, "Effects")
    assert "![Effects (forest plot)](plots/effects.png)" in effects
    for title in ("### jit: against jit = false", "### precision: against precision = float32",
                  "### options.n: against options.n = 64", "### Environments against numpy"):
        assert title in effects, title
    jit = effects.split("### jit: against jit = false")[1].split("\n### ")[0]
    rows = [line for line in jit.splitlines() if line.startswith("| elementwise (run)")]
    assert [row.split(" | ")[2] for row in rows] == ["jax", "torch"]
    for row in rows + [line for line in jit.splitlines() if line.startswith("| **Geometric")]:
        assert re.search(r"[0-9.,]+( [kMG])?× \([^()–]+–[^()–]+\)", row), row   # 1,699; 139.6 k
    n = effects.split("### options.n: against options.n = 64")[1].split("\n### ")[0]
    assert len([line for line in n.splitlines() if line.startswith("| matmul (run)")]) == 3
    assert (effects_run / "plots" / "effects.png").read_bytes()[:4] == b"\x89PNG"
    answers = section(text, "Different answers")
    assert "No cell computed a different answer." in answers
    assert "Cells: 8 same, 2 alone." in answers
    records = [json.loads(p.read_text()) for p in (effects_run / "cells").glob("*.json")]
    assert all(r["answer"]["output"]["rms"] > 0 for r in records if r["status"] == "ok")


@pytest.mark.browser
def test_the_html_report_shows_the_forest_plot_in_chromium(effects_run, chromium, tmp_path):
    import matplotlib.image

    page = (effects_run / "report.html").read_text(encoding="utf-8")
    # A copy of the page that writes where the forest plot is drawn into the DOM (the report
    # itself carries no script).
    probe = tmp_path / "report-probe.html"
    probe.write_text(page.replace("</body>", """<script>
addEventListener("load", () => {
  const img = document.querySelector('img[alt="Effects (forest plot)"]');
  const box = img.getBoundingClientRect();
  document.body.dataset.forest = [img.complete, img.naturalWidth, img.naturalHeight,
    Math.round(box.width), Math.round(box.height), Math.round(box.top + scrollY)].join(",");
});
</script></body>"""), encoding="utf-8")
    # The layout is measured at the width the screenshot is taken at (a narrower default
    # window reflows the page: the plot would sit elsewhere).
    dom = chromium("--window-size=1400,900", "--virtual-time-budget=5000", "--dump-dom",
                   probe.as_uri())
    assert "<h2>Findings</h2>" in dom and "<h2>Effects</h2>" in dom
    complete, natural_w, natural_h, width, height, top = re.search(
        r'data-forest="([^"]+)"', dom).group(1).split(",")
    assert complete == "true" and int(natural_w) > 500 and int(natural_h) > 100
    assert int(width) > 500 and int(height) > 100            # laid out, not collapsed
    shot = tmp_path / "report.png"
    bottom = int(top) + int(height)
    chromium(f"--window-size=1400,{bottom + 20}", f"--screenshot={shot}", probe.as_uri())
    pixels = matplotlib.image.imread(shot)[int(top):bottom, :, :3]
    # The forest's points and intervals are drawn in matplotlib's tab:blue (31, 119, 180).
    blue = (abs(pixels[..., 0] - 31 / 255) < 0.1) & (abs(pixels[..., 1] - 119 / 255) < 0.1) \
        & (abs(pixels[..., 2] - 180 / 255) < 0.1)
    assert blue.sum() > 200, blue.sum()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "effects-report.png")


SHORTCUT_MATRIX = matrix_text(
    "shortcut", repeats=3, steps=5, executor="local", environments={
        "numpy": environment("numpy"),
        "numpy-again": environment("numpy"),
        # Does half the work: sleeps half as long, a scaled answer.
        "numpy-shortcut": environment("numpy", env={"DL_BENCH_SELFTEST_SHORTCUT": "0.5"})},
    benchmarks=[{"workload": "selftest", "options": {"sleep_ms": 20.0}}])


def test_an_environment_that_computes_differently_is_marked_and_never_best(tmp_path, capsys):
    run = run_matrix(tmp_path, SHORTCUT_MATRIX, "shortcut")
    printed = capsys.readouterr().out
    text = (run / "report.md").read_text(encoding="utf-8")
    main = next(line for line in section(text, "Time per step (ms, geometric mean of the repeat "
                                               "medians; lower is better; best in bold)").splitlines()
                if line.startswith("| selftest (run)"))
    numpy, again, shortcut = [cell.strip() for cell in main.strip(" |").split("|")][2:5]
    # The shortcut is twice as fast, and it is the one cell that is not bold-able.
    assert shortcut.endswith(" ≠") and "**" not in shortcut
    assert float(shortcut.split()[0]) < 0.6 * float(numpy.strip("*"))
    assert "**" in numpy + again or numpy == again        # a tie as printed has no bold
    answers = section(text, "Different answers")
    assert "Cells: 2 same, 1 different." in answers
    assert re.search(r"- `selftest-run-numpy-shortcut-b1-sleep_ms=20.0` \(different, against "
                     r"numpy\): output.rms: [0-9.]+ against [0-9.]+ \(relative difference "
                     r"0.500 > 0.001, float32\)", answers), answers
    findings = section(text, "Findings")
    assert "1 of 3 compared cells computed a different answer" in findings
    assert "numpy-shortcut is fastest" not in findings
    assert "≠" in printed and "computed a different answer" in " ".join(printed.split())
