"""The PostgreSQL results store (--store) against a real server (tests/support/postgres.py): the same
rows read back as from results.sqlite, palaestrAI's views, a run id refused / appended / replaced,
schema creation by runs starting together, one-line errors, and arl-learn, arl-report and arl-study
end to end."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ml_arl.cli.report import main as report_main
from ml_arl.results.run_results import StoreError, StoreReadError
from ml_arl.results.sqlite_store import STORE_FILENAME, ResultsStore, read_results
from ml_arl.results.store_buffer import BufferedStore
from tests.support.postgres import PostgresServer
from tests.support.runs import arl_learn, tiny_config, write_config


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    pg = PostgresServer()
    yield pg
    pg.stop()


@pytest.fixture
def url(server: PostgresServer) -> str:
    return server.database()


def fill(store: BufferedStore) -> None:
    store.record_phase(phase="train", index=0, mode="train", state="running", wall_time=1.0)
    for i in range(7):
        store.record_episode(phase="train", mode="train", behavior="Defender", agent=f"a{i % 2}", worker=i % 2, episode=i,
                             length=10 + i, env_reward=0.5 * i, objective=float(i), elo=1200.0 + i, wall_time=2.0 + i)
        store.record_episode(phase="train", mode="train", behavior="Attacker", agent="b", worker=0, episode=i,
                             length=3, env_reward=-0.5 * i, objective=-float(i), elo=None, wall_time=2.5 + i)
    store.record_steps(phase="train", behavior="Defender", agent="a0", worker=0, episode=0, first_step=0,
                       env_rewards=[0.25, 0.5], objectives=[1.0, 2.0])
    store.record_phase(phase="train", index=0, mode="train", state="done", wall_time=9.0)  # same batch: upserted
    store.record_phase(phase="test", index=1, mode="eval", state="running", wall_time=10.0)
    store.record_episode(phase="test", mode="eval", behavior="Defender", agent="a0", worker=0, episode=0, length=4,
                         env_reward=1.25, objective=1.25, elo=None, wall_time=11.0, policy="droop")


def test_rows_read_back_as_from_sqlite(url: str, tmp_path: Path) -> None:
    from ml_arl.results.server_store import ServerStore, read_run

    with ServerStore(url, "duel", batch_size=5, record_steps=True) as server_store:
        fill(server_store)
        assert server_store.episode_count() == 15 and server_store.episode_count(phase="train", behavior="Attacker") == 7
    with ResultsStore(str(tmp_path / STORE_FILENAME), "duel", batch_size=5, record_steps=True) as local:
        fill(local)
    from_server, from_file = read_run(url, "duel"), read_results(str(tmp_path / STORE_FILENAME))
    assert from_server.series == from_file.series and from_server.phases == from_file.phases
    assert from_server.runs == ["duel"] and "duel" in from_server.path


def test_palaestrai_views_and_double_precision(url: str) -> None:
    import sqlalchemy as sa

    from ml_arl.results.server_store import ServerStore

    with ServerStore(url, "duel", record_steps=True) as store:
        fill(store)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        phases = conn.execute(sa.text("SELECT experiment_run_uid, uid, number, mode, state FROM experiment_run_phases"
                                      " ORDER BY number")).fetchall()
        actions = conn.execute(sa.text("SELECT agent_name, step, reward, objective FROM muscle_actions ORDER BY step")).fetchall()
        objective = conn.execute(sa.text("SELECT SUM(cumulative_objective) FROM muscles_cumulative_objective"
                                         " WHERE agent_name = 'Defender' AND experiment_run_phase = 'train'")).scalar()
        elo = conn.execute(sa.text("SELECT elo FROM episodes WHERE elo IS NOT NULL ORDER BY id DESC LIMIT 1")).scalar()
    engine.dispose()
    assert [tuple(p) for p in phases] == [("duel", "train", 0, "train", "done"), ("duel", "test", 1, "eval", "running")]
    assert [tuple(a) for a in actions] == [("Defender", 0, 0.25, 1.0), ("Defender", 1, 0.5, 2.0)]
    assert objective == 21.0 and elo == 1206.0


def test_a_run_id_is_refused_appended_or_replaced(url: str) -> None:
    from ml_arl.results.server_store import ServerStore, list_runs, read_run

    with ServerStore(url, "r1") as store:
        fill(store)
    with ServerStore(url, "r2") as store:
        fill(store)
    with pytest.raises(StoreError) as info:
        ServerStore(url, "r1")
    assert "already holds run 'r1'" in str(info.value) and "--resume" in str(info.value) and "\n" not in str(info.value)
    with ServerStore(url, "r1", existing="append") as store:
        fill(store)
    assert read_run(url, "r1").episode_count == 30 and read_run(url, "r2").episode_count == 15
    with ServerStore(url, "r1", existing="replace") as store:
        assert store.episode_count() == 0
    assert list_runs(url) == ["r2"] and read_run(url, "r2").episode_count == 15
    with pytest.raises(StoreReadError) as missing:
        read_run(url, "r1")
    assert "holds no run 'r1' (runs there: r2)" in str(missing.value) and missing.value.exit_code == 2


def test_runs_starting_together_create_the_schema_once(url: str) -> None:
    from ml_arl.results.server_store import ServerStore, list_runs

    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            with ServerStore(url, f"run-{i}") as store:
                fill(store)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and sorted(list_runs(url)) == [f"run-{i}" for i in range(4)]


def test_unreachable_server_and_foreign_database_are_one_line(server: PostgresServer) -> None:
    from ml_arl.results.server_store import ServerStore, read_run

    with pytest.raises(StoreError) as down:
        ServerStore("postgresql://arl@127.0.0.1:1/nothing", "r")
    message = str(down.value)
    assert message.startswith("cannot reach the results store postgresql://arl@127.0.0.1:1/nothing") and "\n" not in message
    with pytest.raises(StoreReadError) as foreign:
        read_run(server.url(), "r")  # the server's own database: no ml_arl tables
    assert "not an ml_arl results store" in str(foreign.value)


@pytest.mark.parametrize("value, expected", [
    ("sqlite:///x.db", "is not a PostgreSQL URL"),
    ("postgresql://arl:secret@host/db", "holds a password"),
])
def test_store_url_setting_errors(value: str, expected: str) -> None:
    from pydantic import ValidationError

    from ml_arl.settings import ResultsStoreSettings

    with pytest.raises(ValidationError) as info:
        ResultsStoreSettings(url=value)
    assert expected in str(info.value)
    assert ResultsStoreSettings(url="postgresql+psycopg2://arl@db.example:5432/runs").url


# ------------------------------------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_arl_learn_writes_to_the_server_and_arl_report_reads_it(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ml_arl.results.server_store import read_run

    config = write_config(tmp_path / "reach.yaml", tiny_config(max_steps=1500))
    first = arl_learn([config, "--run-id", "pg", "--store", url], tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    folder = tmp_path / "results" / "pg"
    assert not (folder / STORE_FILENAME).exists()  # one store: the server's
    episodes = read_run(url, "pg").episode_count
    assert episodes > 10
    assert report_main([str(folder), "--no-plot"]) == 0  # the folder's configuration.yaml names the store
    assert "Reach" in capsys.readouterr().out
    assert report_main(["--store", url]) == 0 and capsys.readouterr().out.split() == ["pg"]
    assert report_main(["--store", url, "pg", "--output", str(tmp_path / "pg.png")]) == 0
    assert (tmp_path / "pg.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    # the same run id again, in another folder: the server refuses it, one line, and nothing is written
    again = arl_learn([config, "--run-id", "pg", "--store", url, "--results-dir", str(tmp_path / "elsewhere")], tmp_path)
    said = again.stdout + again.stderr
    assert again.returncode == 1 and "already holds run 'pg'" in said and "Traceback" not in said
    assert not (tmp_path / "elsewhere" / "pg").exists()
    longer = write_config(tmp_path / "reach-longer.yaml", tiny_config(max_steps=3000))
    resumed = arl_learn([longer, "--run-id", "pg", "--store", url, "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert read_run(url, "pg").episode_count > episodes  # appended
    down = arl_learn([config, "--run-id", "down", "--store", "postgresql://arl@127.0.0.1:1/x"], tmp_path)
    assert down.returncode == 1 and "cannot reach the results store" in down.stdout + down.stderr
    assert not (tmp_path / "results" / "down").exists()


@pytest.mark.slow
def test_a_study_on_ray_writes_every_run_into_one_store(url: str, tmp_path: Path) -> None:
    """arl-study --ray-address local --store URL: each run a Ray task, each writing its episodes into
    the one server as <study>/<run>; the study's metric (episodes/env_reward) is read from there."""
    import csv
    import subprocess
    import sys

    pytest.importorskip("ray")
    from ml_arl.results.server_store import list_runs, read_run

    (tmp_path / "base.yaml").write_text(
        "env_settings: {env_path: builtin:Reach, num_envs: 1, manager: inprocess}\n"
        "behaviors:\n  Reach:\n    trainer_type: ppo\n"
        "    hyperparameters: {batch_size: 64, buffer_size: 256, learning_rate: 3.0e-3, num_epoch: 3}\n"
        "    network_settings: {hidden_units: 16, num_layers: 1}\n"
        "    max_steps: 1000\n    summary_freq: 250\n    checkpoint_interval: 500\n    time_horizon: 32\n"
    )
    study = tmp_path / "study.yaml"
    study.write_text(
        "config: base.yaml\ntrials: 2\nparallel: 2\nsampler: random\n"
        "metric: {tag: episodes/env_reward, behavior: Reach, reduce: mean_last_8}\n"
        "search:\n  behaviors.Reach.hyperparameters.learning_rate:"
        " {sampler_type: log_uniform, sampler_parameters: {min_value: 1.0e-4, max_value: 1.0e-2}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "ml_arl.cli.study", str(study), "--run-id", "lr", "--results-dir", str(tmp_path / "results"),
         "--ray-address", "local", "--store", url],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs = sorted(list_runs(url))
    assert len(runs) == 2 and all(r.startswith("lr/trial-") for r in runs), runs
    assert not list((tmp_path / "results" / "lr").glob(f"*/{STORE_FILENAME}"))
    with open(tmp_path / "results" / "lr" / "trials.csv", newline="") as f:
        table = list(csv.DictReader(f))
    for row, run in zip(table, runs):
        rewards = read_run(url, run).series[-1].env_reward
        assert row["state"] == "COMPLETE" and float(row["metric"]) == pytest.approx(sum(rewards[-8:]) / 8, abs=1e-3)
