"""The run in Weights & Biases (``--wandb-project``): config = the merged configuration, every
summary as ``<behavior>/<tag>`` against that behavior's own step (``<behavior>/step``: behaviors
count steps apart, and a phase may start one at 0 while another is far on), the .onnx models as
an artifact when the run ends. Offline (the files under results/<run-id>/wandb/, ``wandb sync``
uploads them later) unless ``--wandb-mode online``, ``WANDB_MODE=online`` or an API key in
``WANDB_API_KEY``. A resumed run continues its W&B run (its id is kept in run_logs/wandb.json).
"""

from __future__ import annotations

import glob
import logging
import math
import os
import secrets
import string
from typing import Any

from ml_arl.core.exceptions import TrackerError
from ml_arl.core.one_line import squeeze
from ml_arl.results.summary_writers import StatsSummary
from ml_arl.results.trackers.run_file import known, remember
from ml_arl.settings import RunOptions

logger = logging.getLogger(__name__)

RUN_FILE = "wandb.json"  # in run_logs/: the W&B run id this run logs to


ENV_MODES = {"online": "online", "offline": "offline", "dryrun": "offline", "disabled": "disabled"}  # WANDB_MODE's


def wandb_mode(requested: Any) -> str:
    if requested:
        return str(requested)
    env = os.environ.get("WANDB_MODE")
    if env:
        if env not in ENV_MODES:
            raise TrackerError(f"WANDB_MODE={env!r} is not a W&B mode; use online, offline or disabled (or unset it)")
        return ENV_MODES[env]
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class WandbWriter:
    def __init__(self, options: RunOptions):
        try:
            import wandb
        except ImportError:
            raise TrackerError("--wandb-project needs wandb: pip install 'ml_arl[trackers]' (or wandb)") from None
        settings, cp = options.tracker_settings, options.checkpoint_settings
        self.write_path = cp.write_path
        run_file = os.path.join(cp.run_logs_dir, RUN_FILE)
        run_id = known(run_file, "id") if cp.resume else None
        run_id = run_id or "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
        mode: Any = wandb_mode(settings.wandb_mode)
        try:
            self.run = wandb.init(
                project=settings.wandb_project, name=cp.run_id, id=run_id, resume="allow", dir=os.path.abspath(cp.write_path),
                mode=mode, config=options.as_dict(), settings=wandb.Settings(silent=True, console="off"),
            )
        except Exception as err:  # noqa: BLE001 - wandb raises many kinds (network, auth); each is one line
            raise TrackerError(f"--wandb-project {settings.wandb_project}: cannot start a W&B run in {mode} mode "
                               f"({type(err).__name__}: {squeeze(str(err), 300)})") from None
        self._wandb = wandb
        self._defined: set[str] = set()
        remember(run_file, {"id": run_id, "project": settings.wandb_project, "mode": mode})
        if mode == "disabled":
            logger.info("W&B: disabled (WANDB_MODE=disabled): it gets nothing from this run")
        else:
            logger.info("W&B: run %s (%s, %s)", run_id, settings.wandb_project, mode)

    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        if category not in self._defined:
            self.run.define_metric(f"{category}/step")
            self.run.define_metric(f"{category}/*", step_metric=f"{category}/step")
            self._defined.add(category)
        data: dict[str, float] = {f"{category}/step": int(step)}
        data.update({f"{category}/{tag}": float(v.mean) for tag, v in values.items() if math.isfinite(v.mean)})
        self.run.log(data)

    def abort(self) -> None:
        self.run.finish(exit_code=1)

    def close(self) -> None:
        models = sorted(glob.glob(os.path.join(self.write_path, "**", "*.onnx"), recursive=True))
        if models:
            artifact = self._wandb.Artifact(f"{self.run.id}-models", type="model")
            for path in models:
                artifact.add_file(path, name=os.path.relpath(path, self.write_path))
            self.run.log_artifact(artifact)
        self.run.finish()
