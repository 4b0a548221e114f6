"""The trend site in a real headless Chromium: every page opens offline, the plots are drawn,
every link leads to a page; a screenshot is kept as the test's artifact."""

from __future__ import annotations

import re
import shutil

import pytest

from runner.history import db, ingest
from runner.history.site import write_site

from tests.fixtures import FIXTURE_RUNS
from runner.paths import RESULTS_DIR
from .runs import write_run

pytestmark = pytest.mark.browser
ARTIFACTS = RESULTS_DIR / "test-artifacts"


def test_the_site_opens_in_chromium_with_plots_and_working_links(tmp_path, chromium):
    import matplotlib.image

    engine = db.open_history(f"sqlite:///{tmp_path / 'history.sqlite'}")
    for i in range(10):
        ingest.import_run(engine, write_run(tmp_path / "runs", "nightly", i,
                                            level=1.3 if i >= 6 else 1.0, noise=0.02, seed=i,
                                            distributions={"numpy": "2.4.6" if i >= 6 else "2.4.5"}))
    ingest.import_run(engine, FIXTURE_RUNS / "base")
    index = write_site(engine, tmp_path / "site")
    engine.dispose()

    dom = chromium("--dump-dom", index.as_uri())
    assert "<h1>Benchmark history</h1>" in dom and "Latest run" in dom
    links = re.findall(r'href="([^"]+)"', dom)
    assert len(links) == 3                                  # cnn, matmul, elementwise families
    for link in links:
        assert not link.startswith(("http:", "https:", "//"))   # nothing from outside
        page = (index.parent / link).resolve()
        family = chromium("--dump-dom", page.as_uri())
        assert 'id="trend"' in family and "← all cell families" in family
        plot = re.search(r'<img src="([^"]+)"', family).group(1)
        assert (page.parent / plot).is_file()
        back = re.search(r'href="([^"]+)"', family).group(1)
        assert (page.parent / back).resolve() == index.resolve()

    cnn = next(link for link in links if "cnn" in link)
    family = chromium("--dump-dom", (index.parent / cnn).as_uri())
    assert "1.3" in family and "slower" in family           # the change point, marked
    assert "numpy 2.4.5 → 2.4.6" in family                  # its stack diff beside it
    shot = tmp_path / "family.png"
    chromium("--window-size=1400,1100", f"--screenshot={shot}", (index.parent / cnn).as_uri())
    pixels = matplotlib.image.imread(shot)
    # The plot is drawn: plenty of saturated (line-coloured) pixels, not a blank page.
    saturation = pixels[..., :3].max(axis=2) - pixels[..., :3].min(axis=2)
    assert (saturation > 0.3).sum() > 2000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "history-site-family.png")
