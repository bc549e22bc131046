"""Property-based fuzzing of config loading and validation with hypothesis.

Two generators, 1,050 configs per run in all (700 + 350) (``derandomize``: the same ones in every CI run, so
a failure reproduces; set ARL_FUZZ_RANDOM=1 to explore new ones locally):
  * structural: a rich valid config with values replaced by values of other types, sizes and
    signs (nan, inf, huge integers, lists, mappings, strings), keys deleted, unknown keys added,
    sections nested or wrapped in lists, written out as YAML;
  * textual: the same config's YAML text with tokens inserted (brackets, anchors, aliases, tags,
    tabs, NUL, document markers, merge keys), slices deleted or repeated.
Each goes through `arl-learn CONFIG --check` in-process. Every outcome must be exit 0 with the
merged configuration on stdout, or exit 2 with one-line problems on stderr; never an exception,
never a traceback, never a file written.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import tempfile
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ml_arl.cli import learn as cli

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
STRUCTURAL_EXAMPLES = 700
TEXT_EXAMPLES = 350
FUZZ_SETTINGS = dict(
    deadline=None,
    database=None,
    derandomize=not os.environ.get("ARL_FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

BASE: dict[str, Any] = {
    "default_settings": {"max_steps": 1000, "summary_freq": 100},
    "behaviors": {
        "Reach": {
            "trainer_type": "ppo",
            "hyperparameters": {
                "batch_size": 64, "buffer_size": 256, "learning_rate": 3.0e-4, "beta": 5.0e-3, "epsilon": 0.2,
                "lambd": 0.95, "num_epoch": 3, "learning_rate_schedule": "linear",
            },
            "network_settings": {"normalize": False, "hidden_units": 32, "num_layers": 2, "vis_encode_type": "simple"},
            "reward_signals": {"extrinsic": {"gamma": 0.99, "strength": 1.0}},
            "keep_checkpoints": 2, "checkpoint_interval": 500, "max_steps": 1000, "time_horizon": 32,
            "summary_freq": 500, "threaded": False, "role": "defender",
            "self_play": {"save_steps": 100, "swap_steps": 50, "window": 3, "play_against_latest_model_ratio": 0.5},
        },
    },
    "env_settings": {"env_path": "builtin:Reach", "num_envs": 1, "num_areas": 1, "seed": 1, "timeout_wait": 30},
    "engine_settings": {"width": 84, "height": 84, "time_scale": 20.0, "quality_level": 5},
    "checkpoint_settings": {"run_id": "fz", "resume": False, "force": False},
    "torch_settings": {"device": "cpu"},
    "environment_parameters": {
        "p": 1.5,
        "q": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.0, "max_value": 2.0, "seed": 3}},
    },
    "phases": [{"name": "train", "max_steps": 100}, {"name": "test", "mode": "test", "episodes": 3}],
    "results_store": {"enabled": True, "record_steps": False},
    "debug": False,
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "ppo", "sac", "poca", "..", "../x", "/tmp", "builtin:Nope", "gymnasium:X-v0", "cuda:9",
                     "5.0e5", "3.0e-4", "linear", "constant", "test", "train", "uniform", "gaussian", "yes", "null"]),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += paths(value, prefix + (i,))
    return out


def get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    config = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        all_paths = [p for p in paths(config) if p]
        if not all_paths:
            break
        path = draw(st.sampled_from(all_paths))
        parent = get(config, path[:-1])
        key = path[-1]
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "wrap", "nest"]))
        if op == "replace":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(values)
        elif op == "wrap":
            parent[key] = [parent[key]]
        elif op == "nest":
            parent[key] = {draw(st.text(min_size=1, max_size=8)): parent[key]}
    return config


TOKENS = ["[", "]", "{", "}", ":", "- ", "&a ", "*a", "!!python/object:os.system ", "!Custom ", "!!binary ", "\t",
          "\x00", "'", '"', "\n---\n", "? ", "<<: *a\n", "#", "\n  ", "9" * 40, ".nan", "~", ",", "|\n", ">\n",
          "\ufeff", "\x85", "%YAML 1.1\n"]


@st.composite
def mutated_texts(draw: st.DrawFn) -> bytes:
    text = yaml.safe_dump(BASE, sort_keys=False)
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        pos = draw(st.integers(min_value=0, max_value=len(text)))
        op = draw(st.sampled_from(["insert", "insert", "delete", "repeat", "comment"]))
        if op == "comment":  # harmless: a comment line at a line start (so accepted files occur too)
            starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
            at = starts[draw(st.integers(min_value=0, max_value=len(starts) - 1))]
            text = text[:at] + "# fuzz\n" + text[at:]
        elif op == "insert":
            text = text[:pos] + draw(st.sampled_from(TOKENS)) + text[pos:]
        elif op == "delete":
            end = min(len(text), pos + draw(st.integers(min_value=1, max_value=40)))
            text = text[:pos] + text[end:]
        else:
            end = min(len(text), pos + draw(st.integers(min_value=1, max_value=80)))
            text = text[:pos] + text[pos:end] * draw(st.integers(min_value=2, max_value=5)) + text[end:]
    return text.encode("utf-8", errors="surrogatepass")


def check_outcome(folder: str, content: bytes) -> int:
    """arl-learn CONFIG --check on ``content``: exit 0 (valid) or 2 (one-line problems); nothing written."""
    path = os.path.join(folder, "fuzz.yaml")
    with open(path, "wb") as f:
        f.write(content)
    before = sorted(os.listdir(folder))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([path, "--check", "--results-dir", os.path.join(folder, "results"), "--run-id", "fuzz"])
    stdout, stderr = out.getvalue(), err.getvalue()
    assert code in (0, 2), (code, stderr)
    assert "Traceback" not in stdout + stderr, stderr
    lines = stderr.strip().splitlines()
    assert all(line.startswith(("arl-learn: error: ", "[WARNING] ", "[INFO] ")) for line in lines), stderr
    if code == 0:
        assert stdout.startswith("behaviors:") and "checkpoint_settings:" in stdout  # the merged configuration
        assert not any(line.startswith("arl-learn: error: ") for line in lines), stderr
    else:
        assert stdout == "" and any(line.startswith("arl-learn: error: ") for line in lines), stderr
    assert sorted(os.listdir(folder)) == before, "a config check wrote a file"
    return code


def fuzz(contents: st.SearchStrategy[bytes], examples: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``examples`` generated files through check_outcome; both accepted and refused ones must occur."""
    outcomes = {0: 0, 2: 0}
    with tempfile.TemporaryDirectory() as folder:
        monkeypatch.chdir(folder)

        @settings(max_examples=examples, **FUZZ_SETTINGS)  # type: ignore[arg-type]
        @given(contents)
        def run(content: bytes) -> None:
            outcomes[check_outcome(folder, content)] += 1

        run()
    assert sum(outcomes.values()) >= examples
    assert min(outcomes.values()) > 0, outcomes


@pytest.mark.slow
def test_fuzzed_config_structures_never_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    as_yaml = mutated_configs().map(
        lambda config: yaml.dump(config, Dumper=DUMPER, allow_unicode=True).encode("utf-8", errors="surrogatepass")
    )
    fuzz(as_yaml, STRUCTURAL_EXAMPLES, monkeypatch)


def test_fuzzed_config_texts_never_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    fuzz(mutated_texts(), TEXT_EXAMPLES, monkeypatch)


def test_the_unmutated_fuzz_base_is_valid() -> None:
    """The generators start from a config that passes, so mutations test the edges, not one early error."""
    with tempfile.TemporaryDirectory() as folder:
        check_outcome(folder, yaml.safe_dump(BASE).encode())
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert cli.main([os.path.join(folder, "fuzz.yaml"), "--check", "--results-dir", os.path.join(folder, "r")]) == 0
