"""Experiment trackers: MLflow against a real ``mlflow server`` on loopback (read back with
MlflowClient), W&B in offline mode (its run file read back), stats-writer plugins from entry points
(a writer made for ML-Agents, unchanged), and what a tracker's failure does (before training: one
line, exit 2; during training: a warning, the run goes on)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.runs import arl_learn_here, tiny_config, write_config

SERVER_START_S = 90.0
PLUGIN_MODULE = '''\
"""A stats writer as ML-Agents' docs show one (ml-agents-plugin-examples), unchanged."""
import json
from typing import Dict, List

from mlagents.trainers.settings import RunOptions
from mlagents.trainers.stats import StatsAggregationMethod, StatsPropertyType, StatsSummary, StatsWriter

OUT = {out!r}


class FileStatsWriter(StatsWriter):
    def __init__(self, run_id: str):
        self.run_id = run_id

    def write_stats(self, category: str, values: Dict[str, StatsSummary], step: int) -> None:
        with open(OUT, "a") as f:
            for key, summary in values.items():
                f.write(json.dumps({{"run": self.run_id, "category": category, "key": key, "step": step,
                                    "mean": summary.mean, "num": summary.num,
                                    "sum": summary.aggregation_method == StatsAggregationMethod.SUM}}) + "\\n")

    def add_property(self, category: str, property_type: StatsPropertyType, value) -> None:
        if property_type == StatsPropertyType.HYPERPARAMETERS:
            with open(OUT, "a") as f:
                f.write(json.dumps({{"hyperparameters": category, "trainer_type": value["trainer_type"]}}) + "\\n")


def get_file_stats_writer(run_options: RunOptions) -> List[StatsWriter]:
    return [FileStatsWriter(run_options.checkpoint_settings.run_id)]
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    pytest.importorskip("mlflow")
    port = _free_port()
    log = open(tmp_path / "mlflow-server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"mlflow server did not start: {(tmp_path / 'mlflow-server.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=15)
        log.close()


def _config(tmp_path: Path) -> Path:
    config = tiny_config(max_steps=1500, summary_freq=500)
    config["behaviors"] = {"Reach": {}}
    config["env_settings"]["manager"] = "inprocess"
    return write_config(tmp_path / "config.yaml", config)


@pytest.mark.slow
def test_mlflow_gets_params_metrics_and_artifacts(tmp_path: Path, mlflow_server: str) -> None:
    from mlflow.tracking import MlflowClient

    run = arl_learn_here([_config(tmp_path), "--run-id", "tracked", "--mlflow-uri", mlflow_server,
                          "--mlflow-experiment", "tests"], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("tests")
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.info.run_name == "tracked" and found.info.status == "FINISHED"
    assert found.data.params["behaviors.Reach.trainer_type"] == "ppo"  # the merged config
    assert float(found.data.params["behaviors.Reach.hyperparameters.learning_rate"]) > 0
    history = client.get_metric_history(found.info.run_id, "Reach/Environment/Cumulative Reward")
    assert [m.step for m in history] == [500, 1000, 1500]
    artifacts = {a.path for a in client.list_artifacts(found.info.run_id)}
    assert {"models", "configuration.yaml", "report.png"} <= artifacts, artifacts
    assert "models/Reach.onnx" in {a.path for a in client.list_artifacts(found.info.run_id, "models")}
    saved = json.loads((tmp_path / "results" / "tracked" / "run_logs" / "mlflow.json").read_text())
    assert saved["run_id"] == found.info.run_id
    resumed = arl_learn_here([_config(tmp_path), "--run-id", "tracked", "--resume", "--mlflow-uri", mlflow_server,
                              "--mlflow-experiment", "tests"], tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    (again,) = client.search_runs([experiment.experiment_id])  # the same MLflow run, continued
    assert again.info.run_id == found.info.run_id and again.info.status == "FINISHED"


def test_an_mlflow_server_that_does_not_answer_is_one_line_before_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    run = arl_learn_here([_config(tmp_path), "--run-id", "down", "--mlflow-uri", f"http://127.0.0.1:{_free_port()}"], tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    errors = [line for line in (run.stdout + run.stderr).splitlines() if "ERROR" in line or "error:" in line]
    assert len(errors) == 1 and "--mlflow-uri http://127.0.0.1:" in errors[0] and "cannot start an MLflow run" in errors[0]
    assert "Traceback" not in run.stdout + run.stderr
    assert not list((tmp_path / "results" / "down").glob("Reach/*.pt"))  # no training


def wandb_records(path: Path) -> Iterator[bytes]:
    """The records of a .wandb file: a 7-byte header (":W&B", magic, version), then LevelDB-log
    chunks (checksum, length, type) in 32 KiB blocks; FIRST/MIDDLE/LAST chunks join into one record."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk


@pytest.mark.slow
def test_wandb_offline_run_holds_config_history_and_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    run = arl_learn_here([_config(tmp_path), "--run-id", "wb", "--wandb-project", "arl-tests"], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    (path,) = (tmp_path / "results" / "wb" / "wandb").glob("offline-run-*/run-*.wandb")
    kinds: dict[str, int] = {}
    history = []
    config_keys: list[str] = []
    for raw in wandb_records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "run":
            assert record.run.project == "arl-tests" and record.run.display_name == "wb"
            config_keys = [item.key for item in record.run.config.update]
        elif kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item})
    assert "behaviors" in config_keys and "env_settings" in config_keys
    rewards = [h for h in history if "Reach/Environment/Cumulative Reward" in h]
    assert [h["Reach/step"] for h in rewards] == [500, 1000, 1500]
    assert kinds.get("artifact") == 1 and kinds.get("exit") == 1, kinds
    saved = json.loads((tmp_path / "results" / "wb" / "run_logs" / "wandb.json").read_text())
    assert saved["mode"] == "offline" and path.name == f"run-{saved['id']}.wandb"


def _install_plugin(site: Path, out: Path, broken: bool = False) -> None:
    """A distribution with an entry point in ML-Agents' group, as pip would leave it."""
    site.mkdir()
    (site / "file_stats_writer.py").write_text(PLUGIN_MODULE.format(out=str(out)) + ("raise ValueError('half-installed')\n" if broken else ""))
    info = site / "file_stats_writer-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: file-stats-writer\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mlagents.stats_writer]\nfile_writer = file_stats_writer:get_file_stats_writer\n")


def test_an_mlagents_stats_writer_plugin_works_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "stats.jsonl"
    _install_plugin(tmp_path / "site", out)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "mlagents" or m.startswith("mlagents.") or m == "file_stats_writer"]:
        monkeypatch.delitem(sys.modules, name)
    run = arl_learn_here([_config(tmp_path), "--run-id", "plugged"], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert {"hyperparameters": "Reach", "trainer_type": "ppo"} in lines
    rewards = [x for x in lines if x.get("key") == "Environment/Cumulative Reward"]
    assert [x["step"] for x in rewards] == [500, 1000, 1500] and all(x["run"] == "plugged" for x in rewards)
    assert all(x["category"] == "Reach" and x["num"] >= 1 and not x["sum"] for x in rewards)
    assert "Stats writer plugin file_writer: 1 writer(s)" in run.stdout + run.stderr


def test_a_broken_plugin_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_plugin(tmp_path / "site", tmp_path / "stats.jsonl", broken=True)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "file_stats_writer", raising=False)
    run = arl_learn_here([_config(tmp_path), "--run-id", "broken"], tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    text = run.stdout + run.stderr
    assert "stats writer plugin 'file_writer' (file_stats_writer:get_file_stats_writer, group mlagents.stats_writer) failed: " \
        "ValueError: half-installed" in text
    assert "Traceback" not in text


def test_a_tracker_failing_during_the_run_is_dropped_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    from ml_arl.results.summary_writers import StatsSummary
    from ml_arl.results.trackers import GuardedWriter

    class Flaky:
        calls = 0

        def write_stats(self, category: str, values: dict, step: int) -> None:
            Flaky.calls += 1
            raise ConnectionError("server gone\nsecond line")

    guarded = GuardedWriter("MLflow", Flaky())
    for step in (1, 2, 3):
        guarded.write_stats("B", {"x": StatsSummary(1.0, 0.0, 1)}, step)
    guarded.close()
    assert Flaky.calls == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["MLflow: writing summaries failed (ConnectionError: server gone second line); it gets nothing more from this run"]


def test_mlflow_batches_that_fail_to_send_drop_the_tracker_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """MLflow sends summaries on its own thread; the first batch it could not send is said once, at
    the next summary (not when the run ends), and the writer gets nothing more."""
    pytest.importorskip("mlflow")
    from concurrent.futures import Future

    from mlflow.utils.async_logging.run_operations import RunOperations

    from ml_arl.results.summary_writers import StatsSummary
    from ml_arl.results.trackers import GuardedWriter
    from ml_arl.results.trackers.mlflow_writer import MLflowWriter

    failed: Future[None] = Future()
    failed.set_exception(ConnectionError("Connection refused"))
    writer = MLflowWriter.__new__(MLflowWriter)  # as started, without a server
    writer._pending = [RunOperations([failed])]
    writer.client = None  # never reached: the failure comes first
    guarded = GuardedWriter("MLflow", writer)
    for step in (1, 2):
        guarded.write_stats("B", {"x": StatsSummary(1.0, 0.0, 1)}, step)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith("MLflow: writing summaries failed (MlflowException:"), warnings
    assert "Connection refused" in warnings[0]


def test_a_tracker_that_cannot_start_ends_the_started_ones_and_leaves_no_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("WANDB_MODE", "bogus")
    args = [_config(tmp_path), "--run-id", "two", "--mlflow-uri", uri, "--wandb-project", "arl-tests"]
    run = arl_learn_here(args, tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    errors = [line for line in (run.stdout + run.stderr).splitlines() if "ERROR" in line or "error:" in line]
    assert errors == ["[ERROR] WANDB_MODE='bogus' is not a W&B mode; use online, offline or disabled (or unset it)"], errors
    (found,) = MlflowClient(tracking_uri=uri).search_runs([MlflowClient(tracking_uri=uri).get_experiment_by_name("ml_arl").experiment_id])
    assert found.info.status == "FAILED"  # not left RUNNING
    assert not (tmp_path / "results" / "two").exists()  # nothing ran: the same command runs once mended
    monkeypatch.setenv("WANDB_MODE", "disabled")
    again = arl_learn_here(args, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "W&B: disabled (WANDB_MODE=disabled)" in again.stdout + again.stderr
    assert not (tmp_path / "results" / "two" / "wandb").exists()


def test_a_file_store_uri_says_how_to_use_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    run = arl_learn_here([_config(tmp_path), "--run-id", "files", "--mlflow-uri", f"file://{tmp_path / 'mlruns'}"], tmp_path)
    text = run.stdout + run.stderr
    if run.returncode == 0:
        pytest.skip("this MLflow takes a file store without being asked")
    assert run.returncode == 2 and "give a database (e.g. --mlflow-uri sqlite:///mlflow.db) or set MLFLOW_ALLOW_FILE_STORE=true" in text
    assert "Traceback" not in text
