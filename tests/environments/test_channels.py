"""Channels (runner/environments/channels.py): a derived stack that follows a framework's nightly
builds — the build of a day (or the newest) chosen from the versions the package index lists,
put in place of the release in the image folder's `.in`, the release left out of the resolution.

The first tests need no network; those marked slow ask the real package index (pip and uv over
PyPI, skipped when it is out of reach): a dated keras-nightly resolves and the plan names it, a
day without a build is one clear line, exit 2."""

from __future__ import annotations

import pytest

from runner.environments import channels, indexes, installed, stacks, venvs
from runner.paths import IMAGES_DIR
from tests.matrices import environment, matrix_text

KERAS_NIGHTLIES = ["3.16.0.dev2026102704", "3.16.0.dev2026102604", "3.16.0.dev2026102504",
                   "3.15.0", "3.16.0.dev2026102319"]


def test_a_nightly_version_says_its_day():
    assert channels.build_day("3.16.0.dev2026102704") == "2026-10-27"         # keras-nightly
    assert channels.build_day("2.23.0.dev20261026") == "2026-10-26"           # tf-nightly
    assert channels.build_day("0.33.0.dev202610250352") == "2026-10-25"       # keras-hub-nightly
    assert channels.build_day("3.15.1") is None
    assert channels.build_day("1.0.dev3") is None
    assert channels.build_day("1.0.dev20261341") is None                      # no such day


def test_a_day_takes_its_highest_build_and_no_day_the_newest():
    assert channels.choose("keras-nightly", KERAS_NIGHTLIES, "2026-10-26") == \
        ("3.16.0.dev2026102604", "2026-10-26")
    assert channels.choose("keras-nightly", KERAS_NIGHTLIES, None) == \
        ("3.16.0.dev2026102704", "2026-10-27")
    two_lines = ["2.23.0.dev2026102618", "2.21.0.dev2026102609", "2.22.0.dev2026101709"]
    assert channels.choose("tf-keras-nightly", two_lines, "2026-10-26")[0] == "2.23.0.dev2026102618"


def test_a_day_without_a_build_names_the_nearest_days():
    with pytest.raises(channels.ChannelError) as caught:
        channels.choose("keras-nightly", KERAS_NIGHTLIES, "2026-10-24")
    assert str(caught.value) == ("keras-nightly has no build dated 2026-10-24 (nearest: "
                                 "2026-10-23 (3.16.0.dev2026102319) and 2026-10-25 "
                                 "(3.16.0.dev2026102504))")
    with pytest.raises(channels.ChannelError, match="lists no dated build"):
        channels.choose("keras", ["3.15.1"], None)


def test_the_build_replaces_its_release_which_is_left_out_of_the_resolution():
    text = (IMAGES_DIR / "tensorflow" / "requirements-cuda.in").read_text()
    build = channels.Build("tensorflow", "tf-nightly", "2.23.0.dev20261026", "nightly",
                           date="2026-10-26")
    lines = stacks.requirement_lines(text)
    out, excluded = channels.substituted(text, [build], lines)
    assert "tf-nightly[and-cuda]==2.23.0.dev20261026    # channel nightly, 2026-10-26 (was " \
           "tensorflow[and-cuda]==2.21.0)" in out.splitlines()
    assert excluded == ["tensorflow"] and "keras==3.15.1" in out.splitlines()
    torch = channels.Build("torch", "torch", "2.14.0.dev20261026+cpu", "nightly",
                           date="2026-10-26", index=channels.NIGHTLY["torch"].index_for("cpu"))
    text = (IMAGES_DIR / "torch" / "requirements.in").read_text()
    out, excluded = channels.substituted(text, [torch], stacks.requirement_lines(text))
    assert out.startswith("--extra-index-url https://download.pytorch.org/whl/nightly/cpu\n")
    assert excluded == []                    # the same name: nothing else to leave out


def test_a_channel_follows_the_framework_under_test_unless_told():
    assert channels.followed([], "keras") == ("keras",)
    assert channels.followed([], "jax") == ("jax", "jaxlib")
    assert channels.followed(["Keras_Hub", "keras"], "keras") == ("keras-hub", "keras")
    with pytest.raises(channels.ChannelError, match="numpy has no nightly channel the runner "
                                                    "knows"):
        channels.resolve(["numpy"], ["numpy"], "cpu", None)
    with pytest.raises(channels.ChannelError, match="requirements have no keras-hub to follow"):
        channels.resolve(["keras-hub"], ["tensorflow", "tf-keras"], "cpu", None)


def test_the_matrix_says_what_is_wrong_with_a_channel(write_matrix, run_cli):
    for keys, said in (({"date": "2026-13-01"}, "date: '2026-13-01': a build's day is "
                                                "YYYY-MM-DD (2026-10-27)"),
                       ({"channel": "weekly"}, "channel: "),
                       ({"follow": ["keras"]}, "follow names what follows a channel"),
                       ({"channel": "nightly", "follow": ["keras>=3"]},
                        "follow[0]: 'keras>=3': name a distribution only"),
                       ({"channel": "nightly", "pins": ["keras==3.16.0"], "follow": ["keras"]},
                        "follow[0]: keras is already in pins")):
        text = matrix_text("ch", environments={"k": environment("keras-jax", **keys)},
                           benchmarks=[{"workload": "matmul", "environments": ["*"]}])
        code, out, err = run_cli("plan", write_matrix(text, with_environments=False))
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "environments.k" in err and said in err, err


# --- against the real package index ----------------------------------------------------------

@pytest.fixture
def own_caches(tmp_path, monkeypatch):
    monkeypatch.setattr(stacks, "CACHE_ROOT", tmp_path / "stack-cache")
    monkeypatch.setattr(venvs, "ENV_ROOT", tmp_path / "envs")
    return tmp_path / "stack-cache"


def nightly_matrix(**keys) -> str:
    return matrix_text("nightly", executor="local",
                       environments={"keras-jax": environment("keras-jax"),
                                     "keras-nightly": environment("keras-jax", **keys)},
                       benchmarks=[{"workload": "cnn", "task": "fit", "batch_size": 32,
                                    "size": "tiny", "environments": ["*"]}])


@pytest.mark.slow
def test_a_dated_keras_nightly_resolves_and_the_plan_names_it(pypi, own_caches, write_matrix,
                                                              run_cli, results_dir,
                                                              monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    listed = channels.listed("keras-nightly")
    day = sorted({d for v in listed if (d := channels.build_day(v))})[-2]   # a day before the newest
    version, _ = channels.choose("keras-nightly", listed, day)
    code, out, err = run_cli("plan", write_matrix(nightly_matrix(date=day),
                                                  with_environments=False))
    assert code == 0, out + err
    [line] = [ln for ln in out.splitlines() if ln.startswith("derived:")]
    assert line.startswith(f"derived: images/jax + keras-nightly=={version} (nightly {day}) → "
                           "lock sha ")
    assert f"+ keras-nightly {version}; - keras 3.15.1" in line
    [lock] = own_caches.glob("jax-cpu-*/requirements.lock")
    pins = installed.lock_pins(lock)
    assert pins["keras-nightly"] == version and "keras" not in pins    # the release left out
    assert pins["keras-hub"] == installed.lock_pins(IMAGES_DIR / "jax" / "requirements.lock")[
        "keras-hub"]
    assert not any(results_dir.iterdir())


@pytest.mark.slow
def test_a_day_without_a_build_is_one_clear_error(pypi, own_caches, write_matrix, run_cli,
                                                  results_dir):
    code, out, err = run_cli("plan", write_matrix(nightly_matrix(date="2001-01-01"),
                                                  with_environments=False))
    assert code == 2 and "Traceback" not in err
    [line] = err.strip().splitlines()
    assert "environments.keras-nightly: images/jax + nightly 2001-01-01 (keras) (cpu) cannot " \
           "be resolved: keras-nightly has no build dated 2001-01-01 (nearest: 20" in line
    assert not any(results_dir.iterdir()) and not own_caches.exists()


@pytest.mark.slow
def test_an_index_this_machine_does_not_reach_is_said_so(write_matrix, run_cli, own_caches):
    index = channels.NIGHTLY["torch"].index_for("cpu")
    if not indexes.unreachable(index or ""):
        pytest.skip("PyTorch's nightly index answers here")
    text = matrix_text("nightly", executor="local",
                       environments={"torch-nightly": environment("torch", channel="nightly")},
                       benchmarks=[{"workload": "matmul", "environments": ["*"]}])
    code, _, err = run_cli("plan", write_matrix(text, with_environments=False))
    assert code == 2
    assert f"torch's nightly builds are published on {index}, which cannot be reached from " \
           "here (" in err


def test_a_pinned_nightly_leaves_its_release_out_of_a_resolution(tmp_path):
    args = channels.excluding({"keras-nightly": "3.16.0.dev2026102704", "keras-hub": "0.32.0"},
                              tmp_path)
    assert args == ["--excludes", str(tmp_path / "excludes.txt")]
    assert (tmp_path / "excludes.txt").read_text() == "keras\n"
    assert channels.excluding({"keras": "3.15.1", "torch": "2.13.0"}, tmp_path / "x") == []
