"""Hostile and broken config files, and what arl-learn must answer to each.

Used by tests/cli/test_hostile_input.py (every entry through the CLI) and printed as docs/bad-input.md's
"What bad input gets" table by ``python -m tests.support.hostile_corpus``.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

VALID = b"env_settings:\n  env_path: builtin:Reach\nbehaviors:\n  Reach:\n    max_steps: 1000\n"


def _laughs(levels: int = 9) -> bytes:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Case:
    name: str  # what the user wrote, for the table
    content: bytes
    needle: str  # part of the one-line message
    args: list[str] = field(default_factory=list)


CORPUS: list[Case] = [
    Case("YAML nested 10,000 levels deep (flow)", b"a: " + b"[" * 10000 + b"]" * 10000 + b"\n", "nested more than"),
    Case(
        "YAML nested 500 levels deep (block)",
        "".join(" " * i + f"k{i}:\n" for i in range(500)).encode() + b" " * 500 + b"v\n",
        "nested more than",
    ),
    Case("an integer of 5,000 digits", b"behaviors:\n  Reach:\n    max_steps: " + b"9" * 5000 + b"\n", "5000 digits"),
    Case("an integer of 25 digits", b"behaviors:\n  Reach:\n    max_steps: " + b"9" * 25 + b"\n", "out of range"),
    Case("a UTF-16 file", codecs.BOM_UTF16_LE + VALID.decode().encode("utf-16-le"), "UTF-16"),
    Case("a UTF-32 file", codecs.BOM_UTF32_LE + VALID.decode().encode("utf-32-le"), "UTF-32"),
    Case("Latin-1 bytes (not UTF-8)", b"behaviors:\n  Reach:\n    max_steps: 10 # caf\xe9\n", "not UTF-8"),
    Case("a 2 MB file", b"# " + b"x" * 2_000_000 + b"\n", "larger than 1 MB"),
    Case("NUL bytes", b"behaviors:\x00\n", "YAML syntax error"),
    Case("binary garbage", bytes(range(256)) * 4, "not UTF-8"),
    Case(
        "hidden_units: 1000000000000",
        b"behaviors:\n  Reach:\n    network_settings:\n      hidden_units: 1000000000000\n",
        "memory available",
    ),
    Case("!!python/object/apply tag", b"a: !!python/object/apply:os.system [echo hacked]\n", "is not allowed"),
    Case("!!python/name tag", b"behaviors: !!python/name:os.system\n", "is not allowed"),
    Case("a custom tag (!Ref)", b"behaviors:\n  Reach: !Ref other\n", "is not allowed"),
    Case("!!binary tag", b"behaviors:\n  Reach: !!binary aGVsbG8=\n", "is not allowed"),
    Case("billion laughs (aliases expanding to 387 million values)", _laughs(), "expands to more than"),
    Case("an alias that contains itself", b"a: &a [1, *a]\n", "contains it"),
    Case("env_settings as a list", b"env_settings:\n  - env_path: builtin:Reach\n", "env_settings"),
    Case("env_settings as a string", b"env_settings: builtin:Reach\n", "valid dictionary"),
    Case("behaviors as a list", b"behaviors:\n  - Reach\n", "expected a mapping"),
    Case("a behavior's settings as a number", b"behaviors:\n  Reach: 5\n", "expected a mapping"),
    Case("hyperparameters as a string", b"behaviors:\n  Reach:\n    hyperparameters: fast\n", "hyperparameters"),
    Case("the top level a list", b"- behaviors\n- env_settings\n", "top level must be a mapping"),
    Case("a top-level key that is a number", b"1: x\n", "is not a name"),
    Case("a key that is a list", b"? [a, b]\n: c\n", "YAML syntax error"),
    Case("negative engine settings", b"engine_settings:\n  width: -84\n  height: -1\n  time_scale: -20\n", "engine_settings.width"),
    Case("num_envs: 10000000", b"env_settings:\n  env_path: builtin:Reach\n  num_envs: 10000000\n", "less than or equal to 256"),
    Case("num_areas: 100000", b"env_settings:\n  num_areas: 100000\n", "num_areas"),
    Case("learning_rate: .nan", b"behaviors:\n  Reach:\n    hyperparameters:\n      learning_rate: .nan\n", "learning_rate"),
    Case("max_steps: .inf", b"behaviors:\n  Reach:\n    max_steps: .inf\n", "max_steps"),
    Case("strength: 1e999", b"behaviors:\n  Reach:\n    reward_signals:\n      extrinsic:\n        strength: 1e999\n", "strength"),
    Case("seed: 99999999999", b"env_settings:\n  seed: 99999999999\n", "env_settings.seed"),
    Case("sampler seed out of range", b"environment_parameters:\n  p:\n    sampler_type: uniform\n    sampler_parameters:\n      seed: 99999999999999\n", "integer from -1 to"),
    Case("torch device 'tpu:x'", b"torch_settings:\n  device: tpu:x\n", "is not a torch device"),
    Case("two YAML documents", VALID + b"---\n" + VALID, "YAML syntax error"),
    Case("tabs for indentation", b"behaviors:\n\tReach: {}\n", "YAML syntax error"),
    Case("sac memory longer than its batch", b"behaviors:\n  Reach:\n    trainer_type: sac\n    network_settings:\n      memory: {memory_size: 8, sequence_length: 512}\n", "sequence_length: 512 is larger"),
    Case("run_id ../../victim in the config", b"checkpoint_settings:\n  run_id: ../../victim\n", "is not a run name"),
    Case("run_id /absolute/path in the config", b"checkpoint_settings:\n  run_id: /tmp/victim\n", "is not a run name"),
    Case("--run-id ../../victim --force", VALID, "is not a run name", ["--run-id", "../../victim", "--force"]),
    Case("--initialize-from ../other", VALID, "is not a run name", ["--initialize-from", "../other"]),
    Case("a phase loading from run ../x", b"behaviors:\n  Reach: {}\nphases:\n  - name: a\n    max_steps: 10\n    load:\n      Reach: {run: ../x}\n", "is not a run name"),
    Case("a behavior named ../x", b"behaviors:\n  ../x: {}\n", "is not a behavior name"),
    Case("--env-args x=[ (not a YAML value)", VALID, "--env-args", ["--env-args", "x=["]),
]

# Cases that need the filesystem rather than a file's content: (what the user did, the needle).
SPECIAL = [
    ("config path is a folder", "is a directory"),
    ("config file missing", "config file not found"),
    ("--force on a folder arl-learn did not write", "not a run folder written by arl-learn"),
    ("--force on a symbolic link", "symbolic link"),
    ("empty config file (no --env)", "the config is empty"),
]


def table(results: dict[str, tuple[str, int]]) -> str:
    """Markdown table: input -> first line the user sees -> exit code."""
    lines = ["| input | what the user sees | exit code |", "|---|---|---:|"]
    for name, (line, code) in results.items():
        shown = line.replace("|", "\\|")
        lines.append(f"| {name} | `{shown}` | {code} |")
    return "\n".join(lines)


def _run_all() -> dict[str, tuple[str, int]]:
    """Every corpus case through ``arl-learn CONFIG --check`` in a temporary folder."""
    import contextlib
    import io
    import os
    import tempfile

    from ml_arl.cli import learn as cli

    results: dict[str, tuple[str, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        for case in CORPUS:
            path = os.path.join(folder, "config.yaml")
            with open(path, "wb") as f:
                f.write(case.content)
            err = io.StringIO()
            args = case.args or ([] if b"run_id" in case.content else ["--run-id", "r"])
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = cli.main(["config.yaml", "--check", "--env", "builtin:Reach", *args])
            first = next((line for line in err.getvalue().splitlines() if line.startswith("arl-learn: error")), "")
            results[case.name] = (first, code)
    return results


if __name__ == "__main__":
    print(table(_run_all()))
