"""The ``raw`` loop of bench/speed/unity_bridge.py for another venv: plain mlagents-envs ``UnityEnvironment``
stepping a build (get_steps / set_actions with random actions / step, the stats channel drained
every 16 steps), with the three side channels ml_arl uses. It imports nothing of ml_arl, so it
runs where an ML-Agents user's mlagents-envs and protobuf are (e.g. ML-Agents 1.1.0's venv, which
``make peer-mlagents`` makes in .venv-mlagents: mlagents-envs 1.1.0 on protobuf 3.20). Prints one
JSON line: the env steps/s of each timed window, and the versions it ran with.

    VENV/bin/python bench/peers/unity_raw.py --build BUILD --agents 16 --port 23456 [--seconds 3] [--repeats 3]
        [--behavior 'Seeker?team=0'] [--no-stats] [--engine 84 84 5 20 -1 60] [-- build args]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

WARMUP_STEPS = 50
STEPS_PER_STATS_READ = 16


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--build", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--behavior", default="Seeker?team=0")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout-wait", type=int, default=30)
    p.add_argument("--engine", type=float, nargs=6, default=[84, 84, 5, 20, -1, 60],
                   metavar=("WIDTH", "HEIGHT", "QUALITY", "TIME_SCALE", "TARGET_FPS", "CAPTURE_FPS"))
    p.add_argument("build_args", nargs=argparse.REMAINDER, help="after --: the build's own arguments")
    args = p.parse_args()

    import google.protobuf
    import mlagents_envs
    from mlagents_envs import logging_util
    from mlagents_envs.environment import UnityEnvironment
    from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
    from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel
    from mlagents_envs.side_channel.stats_side_channel import StatsSideChannel

    logging_util.set_log_level(logging_util.WARNING)
    width, height, quality, time_scale, target_fps, capture_fps = args.engine
    engine = EngineConfigurationChannel()
    engine.set_configuration_parameters(width=int(width), height=int(height), quality_level=int(quality),
                                        time_scale=time_scale, target_frame_rate=int(target_fps),
                                        capture_frame_rate=int(capture_fps))
    stats = StatsSideChannel()
    env = UnityEnvironment(
        file_name=args.build, worker_id=0, base_port=args.port, seed=0, no_graphics=True, timeout_wait=args.timeout_wait,
        additional_args=[a for a in args.build_args if a != "--"],
        side_channels=[engine, EnvironmentParametersChannel(), stats], log_folder=tempfile.mkdtemp(prefix="unity-raw-"),
    )
    try:
        env.reset()
        spec = env.behavior_specs[args.behavior]

        def run(steps: int) -> None:
            for i in range(steps):
                decision, _terminal = env.get_steps(args.behavior)
                if len(decision):
                    env.set_actions(args.behavior, spec.action_spec.random_action(len(decision)))
                env.step()
                if i % STEPS_PER_STATS_READ == STEPS_PER_STATS_READ - 1:
                    stats.get_and_reset_stats()

        run(WARMUP_STEPS)
        rates = []
        for _ in range(args.repeats):
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                run(STEPS_PER_STATS_READ)
                steps += STEPS_PER_STATS_READ
            rates.append(steps / (time.perf_counter() - t0))
    finally:
        env.close()
    print(json.dumps({"rates": rates, "mlagents_envs": getattr(mlagents_envs, "__version__", "?"),
                      "protobuf": google.protobuf.__version__, "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
