"""Time from starting ``arl-learn`` to the end of its first PPO update, with ml_arl's own Adam
(today) and with ``torch.optim.Adam(fused=True)``.

Question: does ``torch.optim.Adam(fused=True)``, whose first construction imports
``torch._dynamo`` (about 1.2 s on a 2-core machine), keep the time to the first update within
0.1 s of today's if that import is done in a background thread while the workers start?

Variants, each a fresh ``arl-learn`` process (``python -c``, calling ``ml_arl.cli.learn.main``):

- ``today``: arl-learn as it is (ml_arl.trainers.optimizers.Adam, no torch.optim).
- ``torch-adam-prebuilt``: PPOTrainer's optimizer is ``torch.optim.Adam(params, lr, fused=True)``
  behind a small wrapper with the attributes ppo.py uses (``lr``, ``params``, ``zero_grad``,
  ``step``, ``state_dict``, ``load_state_dict``), and a thread started first thing in the
  process imports torch and builds and steps a throwaway ``torch.optim.Adam`` on a dummy tensor,
  so that torch.optim / torch._dynamo are loaded while the workers start.
- ``torch-adam-cold``: the same wrapper without the warm-up thread: the import is paid in
  PPOTrainer.__init__, on the critical path.

ml_arl is not edited: the child installs an import hook that replaces ``Adam`` in
``ml_arl.trainers.ppo.trainer`` right after that module executes (importing it up front would import
torch before the workers are launched and change what is measured).

Clock: the parent takes ``t0 = time.perf_counter()`` just before ``Popen`` and stops when the
child's ``--debug`` log line ``<behavior>: update 1 took X s`` (written by Trainer.advance right
after the update) is read from its output. That includes interpreter start-up, which all variants
pay alike. Also shown, from the child's ``+N ms`` log stamps (ms since logging was imported):
when the workers were launched (the warm-up thread competes with the main thread for the GIL and
with the workers for the 2 cores) and how long update 1 took.

Task: builtin:Reach, 2 workers, buffer 1024. Once the first update's line is read the child
gets SIGTERM (arl-learn's Ctrl-C path: checkpoint, workers closed, exit 0); max_steps is large so
that steps queued while a slow trainer is being built cannot end the run before any update. Runs are interleaved and the variant order rotates every round (A B C, B C A, ...)
so that slow phases of a shared machine hit every variant; one discarded round warms the caches.

    PYTHONPATH=. python bench/first_update.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("today", "torch-adam-prebuilt", "torch-adam-cold")
BUDGET_S = 0.1

CONFIG = """\
env_settings:
  env_path: builtin:Reach
  num_envs: 2
default_settings:
  trainer_type: ppo
  hyperparameters:
    batch_size: 128
    buffer_size: 1024
    learning_rate: 3.0e-3
    num_epoch: 4
  network_settings:
    hidden_units: 32
    num_layers: 2
  max_steps: 100000
  time_horizon: 32
  summary_freq: 2000
  checkpoint_interval: 10000
behaviors:
  Reach: {}
"""

FIRST_UPDATE = re.compile(r"\+(\d+) ms .*: update 1 took ([\d.]+) s")
LAUNCHED = re.compile(r"\+(\d+) ms .*Launched \d+ environment worker")


# ---------------------------------------------------------------------------- the child process
class TorchAdam:
    """``torch.optim.Adam(fused=True)`` with the attributes PPOTrainer uses of ml_arl's Adam."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        import torch

        self.params = list(params)
        self.optimizer = torch.optim.Adam(self.params, lr=lr, betas=betas, eps=eps, fused=True)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        self.optimizer.param_groups[0]["lr"] = value

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> None:
        self.optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state_dict)


def _warm_up_torch_optim() -> None:
    """What the first torch.optim.Adam costs: import torch, torch.optim, torch._dynamo, one step."""
    import torch

    dummy = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([dummy], fused=True)
    dummy.grad = torch.zeros(1)
    optimizer.step()


def _patch_ppo_adam() -> None:
    """Make ``ml_arl.trainers.ppo.trainer.Adam`` be TorchAdam once that module is imported, not before."""
    import importlib.abc
    import importlib.util

    class PatchPPO(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            if name != "ml_arl.trainers.ppo.trainer":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.loader is not None
            run_module = spec.loader.exec_module

            def exec_and_patch(module: Any) -> None:
                run_module(module)
                module.Adam = TorchAdam

            spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, PatchPPO())


def child(variant: str, argv: list[str]) -> int:
    if variant == "torch-adam-prebuilt":
        import threading

        threading.Thread(target=_warm_up_torch_optim, name="torch-optim-warm-up", daemon=True).start()
    if variant != "today":
        _patch_ppo_adam()
    from ml_arl.cli.learn import main

    return main(argv)


CHILD_CODE = "import sys; from bench.first_update import child; sys.exit(child(sys.argv[1], sys.argv[2:]))"


# ---------------------------------------------------------------------------- the parent
def run_once(variant: str, config: Path, results_dir: Path, run_id: str) -> dict[str, float]:
    """One arl-learn run; seconds from Popen to the first update's log line, and child stamps."""
    argv = [str(config), "--debug", "--force", "--run-id", run_id, "--results-dir", str(results_dir)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env["PYTHONUNBUFFERED"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD_CODE, variant, *argv],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    result: dict[str, float] = {}
    lines = []
    for line in proc.stdout:  # read to the end (EOF when the child has exited)
        lines.append(line)
        if "first_update_s" not in result and (m := FIRST_UPDATE.search(line)):
            result["first_update_s"] = time.perf_counter() - t0
            result["child_first_update_s"] = int(m.group(1)) / 1000
            result["update_s"] = float(m.group(2))
            proc.terminate()  # measured; stop the run (SIGTERM: a clean shutdown)
        elif m := LAUNCHED.search(line):
            result["launched_s"] = int(m.group(1)) / 1000
    rc = proc.wait()
    if rc != 0 or "first_update_s" not in result:
        sys.stderr.write("".join(lines[-30:]))
        raise SystemExit(f"{variant}: arl-learn exited {rc} {'without' if 'first_update_s' not in result else 'after'} a first update")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per variant (default: 7)")
    parser.add_argument("--warmup", type=int, default=1, help="discarded rounds first (default: 1)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    variants = args.variants
    times: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="first-update-") as tmp:
        config = Path(tmp) / "reach.yaml"
        config.write_text(CONFIG)
        for round_ in range(args.warmup + args.runs):
            k = round_ % len(variants)
            order = variants[k:] + variants[:k]
            for variant in order:
                r = run_once(variant, config, Path(tmp) / "results", f"{variant}-{round_}")
                tag = "warm-up" if round_ < args.warmup else f"run {round_ - args.warmup + 1}"
                print(
                    f"{tag:>8} {variant:<20} first update {r['first_update_s']:6.3f} s "
                    f"(child log +{r['child_first_update_s']:.3f} s; workers launched +{r.get('launched_s', float('nan')):.3f} s; "
                    f"update 1 took {r['update_s']:.3f} s)",
                    flush=True,
                )
                if round_ >= args.warmup:
                    times[variant].append(r)

    print("\nvariant               median   min    max    launched(median)  per run (s)")
    medians = {}
    for variant in variants:
        firsts = [r["first_update_s"] for r in times[variant]]
        medians[variant] = statistics.median(firsts)
        launched = statistics.median(r.get("launched_s", float("nan")) for r in times[variant])
        print(
            f"{variant:<20} {medians[variant]:6.3f} {min(firsts):6.3f} {max(firsts):6.3f}   {launched:6.3f}            "
            + " ".join(f"{t:.3f}" for t in firsts)
        )
    if "today" not in medians:
        return
    print()
    for variant in variants:
        if variant == "today":
            continue
        diff = medians[variant] - medians["today"]
        verdict = "within" if diff <= BUDGET_S else "NOT within"
        print(f"{variant} minus today: {diff:+.3f} s -> {verdict} the {BUDGET_S} s budget")


if __name__ == "__main__":
    main()
