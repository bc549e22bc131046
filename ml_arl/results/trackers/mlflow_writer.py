"""The run in MLflow (``--mlflow-uri``): one MLflow run per arl-learn run, in the experiment
``--mlflow-experiment``. Params: the merged configuration (configuration.yaml), flattened to dotted
keys. Metrics: every summary, as ``<behavior>/<tag>`` at the trainer's step. Artifacts, when the
run ends: the .onnx models, configuration.yaml and the arl-report picture (report.png). A resumed
run (``--resume``) continues its MLflow run (its id is kept in run_logs/mlflow.json).
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import re
import time
from typing import Any

from ml_arl.core.exceptions import ArlError, TrackerError
from ml_arl.core.one_line import squeeze
from ml_arl.results.summary_writers import StatsSummary
from ml_arl.results.trackers.run_file import known, remember
from ml_arl.settings import RunOptions
from ml_arl.settings.values import flat_items

logger = logging.getLogger(__name__)

RUN_FILE = "mlflow.json"  # in run_logs/: the MLflow run this run logs to
PENDING_LIMIT = 50  # summaries queued for MLflow's sender before write_stats waits for the oldest
PARAM_BATCH = 100  # MLflow takes at most 100 params per log_batch
PARAM_VALUE_LIMIT = 6000  # characters of a param value MLflow keeps
_NOT_IN_A_KEY = re.compile(r"[^A-Za-z0-9_\-. :/]")  # what MLflow refuses in a metric or param name


def mlflow_key(text: str) -> str:
    return _NOT_IN_A_KEY.sub("_", text)


def params_of(options_data: Any) -> dict[str, str]:
    """The merged configuration as MLflow params: dotted keys, values as text (JSON but for strings)."""
    return {
        mlflow_key(key): (value if isinstance(value, str) else json.dumps(value))[:PARAM_VALUE_LIMIT]
        for key, value in flat_items(options_data)
    }


class MLflowWriter:
    def __init__(self, options: RunOptions):
        try:
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise TrackerError("--mlflow-uri needs MLflow: pip install 'ml_arl[trackers]' (or mlflow)") from None
        settings, cp = options.tracker_settings, options.checkpoint_settings
        self.write_path = cp.write_path
        uri = settings.mlflow_uri
        assert uri is not None
        run_file = os.path.join(cp.run_logs_dir, RUN_FILE)
        self._pending: list[Any] = []  # MLflow's operations for the summaries it has not sent yet
        # MLflow retries a request up to 7 times with growing waits (minutes for a server that is down)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        # its sender logs an error for every batch it could not send; the first failure is ours to say, once
        logging.getLogger("mlflow.utils.async_logging").setLevel(logging.CRITICAL)
        try:
            self.client = MlflowClient(tracking_uri=uri)
            experiment = self.client.get_experiment_by_name(settings.mlflow_experiment)
            experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(settings.mlflow_experiment)
            earlier = known(run_file, "run_id") if cp.resume else None
            if earlier is not None:
                self.run_id = earlier
                self.client.update_run(earlier, status="RUNNING")
                logger.info("MLflow: continuing run %s at %s", earlier, uri)
                return
            import ml_arl

            run = self.client.create_run(
                experiment_id, run_name=cp.run_id, tags={"ml_arl.run_id": cp.run_id, "ml_arl.version": ml_arl.__version__}
            )
            self.run_id = run.info.run_id
            params = [Param(k, v) for k, v in params_of(options.as_dict()).items()]
            for start in range(0, len(params), PARAM_BATCH):
                self.client.log_batch(self.run_id, params=params[start : start + PARAM_BATCH])
        except Exception as err:  # noqa: BLE001 - MLflow raises many kinds (connection, REST); each is one line
            if "MLFLOW_ALLOW_FILE_STORE" in str(err):
                raise TrackerError(f"--mlflow-uri {uri}: MLflow no longer takes a file store by default; give a database "
                                   "(e.g. --mlflow-uri sqlite:///mlflow.db) or set MLFLOW_ALLOW_FILE_STORE=true") from None
            raise TrackerError(f"--mlflow-uri {uri}: cannot start an MLflow run ({type(err).__name__}: {squeeze(str(err), 400)})") from None
        remember(run_file, {"run_id": self.run_id, "tracking_uri": uri})
        logger.info("MLflow: run %s at %s", self.run_id, uri)

    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        from mlflow.entities import Metric

        self._check_sent()
        stamp = int(time.time() * 1000)
        metrics = [Metric(mlflow_key(f"{category}/{tag}"), float(v.mean), stamp, int(step))
                   for tag, v in values.items() if math.isfinite(v.mean)]
        if metrics:  # queued: MLflow's own thread sends them (about 70 ms a summary to a local server)
            operation = self.client.log_batch(self.run_id, metrics=metrics, synchronous=False)
            if operation is not None:
                self._pending.append(operation)
            while len(self._pending) > PENDING_LIMIT:  # a server that fell behind slows the run, it does not fill memory
                self._pending.pop(0).wait()

    def _check_sent(self) -> None:
        """Forget the summaries MLflow has sent; one it could not send raises here, at once (the
        writer is then dropped with one warning), not when the run ends."""
        while self._pending:
            futures = getattr(self._pending[0], "_operation_futures", None)  # MLflow's RunOperations
            if futures is None or not all(f.done() for f in futures):
                return
            self._pending.pop(0).wait()

    def abort(self) -> None:
        self.client.set_terminated(self.run_id, "FAILED")

    def _report(self) -> list[str]:
        """report.png of the run (arl-report's picture), drawn now; [] without a results store."""
        from ml_arl.results.plotting import PNG_FILENAME, plot_run
        from ml_arl.results.run_store import store_of

        store = store_of(self.write_path)
        if not store.exists:
            return []
        try:
            results = store.read()
        except ArlError:  # a server store that holds no row of the run yet
            return []
        if not results.series:
            return []
        path = os.path.join(self.write_path, PNG_FILENAME)
        plot_run(results, path)
        return [path]

    def close(self) -> None:
        for operation in self._pending:  # every summary logged (a failure raises here)
            operation.wait()
        self._pending.clear()
        models = sorted(glob.glob(os.path.join(self.write_path, "**", "*.onnx"), recursive=True))
        config = os.path.join(self.write_path, "configuration.yaml")
        for path in models:
            folder = os.path.relpath(os.path.dirname(path), self.write_path)
            self.client.log_artifact(self.run_id, path, artifact_path="models" if folder == "." else f"models/{folder}")
        for path in ([config] if os.path.isfile(config) else []) + self._report():
            self.client.log_artifact(self.run_id, path)
        self.client.set_terminated(self.run_id, "FINISHED")
