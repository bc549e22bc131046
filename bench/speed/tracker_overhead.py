"""What the MLflow tracker costs: milliseconds per summary, and a whole run's wall-clock with and
without it.

Starts ``mlflow server`` on loopback (SQLite backend, in a temporary folder), then

1. times ``MLflowWriter.write_stats`` with the tags a PPO behavior writes per summary (``--summaries``
   calls), and prints the median ms per summary;
2. runs ``arl-learn CONFIG`` ``--repeats`` times without and with ``--mlflow-uri``, interleaved,
   and prints the median wall-clock of each and their ratio.

    python bench/speed/tracker_overhead.py [--config config/ppo/CartPole.yaml] [--repeats 3] [--summaries 200]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PPO_TAGS = [
    "Environment/Cumulative Reward", "Environment/Episode Length", "Environment/Episode Count",
    "Environment/Steps Per Second", "Policy/Entropy", "Policy/Extrinsic Value Estimate", "Policy/Extrinsic Reward",
    "Policy/Learning Rate", "Policy/Epsilon", "Policy/Beta", "Losses/Policy Loss", "Losses/Value Loss",
    "Is Training", "Policy/Step Time",
]


def start_server(folder: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{folder}/mlflow.db", "--artifacts-destination", f"{folder}/artifacts"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("mlflow server did not start within 120 s")


def per_summary_ms(config: str, url: str, folder: str, count: int) -> float:
    sys.path.insert(0, ROOT)
    from ml_arl.results.summary_writers import StatsSummary
    from ml_arl.results.trackers.mlflow_writer import MLflowWriter
    from ml_arl.settings.build import build_run_options
    from ml_arl.settings.config_file import load_config_file

    data, _ = load_config_file(config)
    options = build_run_options(data, {"checkpoint_settings": {"run_id": "per-summary", "results_dir": folder},
                                       "tracker_settings": {"mlflow_uri": url}}, config)
    os.makedirs(options.checkpoint_settings.run_logs_dir, exist_ok=True)
    writer = MLflowWriter(options)
    values = {tag: StatsSummary(1.0 + i, 0.1, 10) for i, tag in enumerate(PPO_TAGS)}
    times = []
    for step in range(count):
        start = time.perf_counter()
        writer.write_stats("CartPole", values, step * 1000)
        times.append(time.perf_counter() - start)
    writer.client.set_terminated(writer.run_id, "FINISHED")
    return 1000 * statistics.median(times)


def run_seconds(config: str, folder: str, run_id: str, extra: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ml_arl.cli.learn", config, "--run-id", run_id, "--results-dir", folder, "--seed", "1", *extra],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=os.path.join(ROOT, "config", "ppo", "CartPole.yaml"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--summaries", type=int, default=200)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server, url = start_server(folder)
        try:
            ms = per_summary_ms(args.config, url, folder, args.summaries)
            print(f"MLflowWriter.write_stats: {ms:.2f} ms per summary of {len(PPO_TAGS)} tags (median of {args.summaries})")
            plain, tracked = [], []
            for i in range(args.repeats):
                plain.append(run_seconds(args.config, folder, f"plain-{i}", []))
                tracked.append(run_seconds(args.config, folder, f"mlflow-{i}", ["--mlflow-uri", url]))
                print(f"round {i + 1}: {plain[-1]:.1f} s without, {tracked[-1]:.1f} s with MLflow")
            a, b = statistics.median(plain), statistics.median(tracked)
            print(f"whole run ({os.path.relpath(args.config, ROOT)}): median {a:.1f} s without, {b:.1f} s with MLflow: "
                  f"{100 * (b / a - 1):+.1f}%")
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
