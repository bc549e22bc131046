"""Per-step cost of acting with each image encoder in the workers (the numpy muscle), next to the
same actor's forward pass in torch.

One ``Muscle.act`` on a batch of observations (16 by default, as 16 agents of one behavior
deciding together), with the actor of the learning tests (one layer of 32 units, one discrete
branch) and ML-Agents' image sizes for each encoder: 36x36x3 for ``simple``, ``nature_cnn`` and
``resnet``, 15x15x3 for ``resnet`` at its minimum, 5x5x5 for ``match3``, 36x36x3 for
``fully_connected``. BLAS runs on one thread, as in the worker processes (``envs/backends/forkserver.py``
sets the same variables); torch likewise gets one thread.

Reported per encoder: the median and the best of ``--repeats`` timed calls, as wall time and as
the process's CPU time (on a shared machine the CPU time is the steadier of the two).

Usage: python bench/speed/visual_encoders.py [--batch 16] [--repeats 200]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType  # noqa: E402

from ml_arl.acting.muscle import Muscle  # noqa: E402
from ml_arl.networks.actor_critic import ActorCritic  # noqa: E402
from ml_arl.settings import NetworkSettings  # noqa: E402

CASES = [
    ("simple", (36, 36, 3)),
    ("nature_cnn", (36, 36, 3)),
    ("resnet", (36, 36, 3)),
    ("resnet", (15, 15, 3)),
    ("match3", (5, 5, 5)),
    ("fully_connected", (36, 36, 3)),
]


def _spec(shape: tuple[int, int, int]) -> BehaviorSpec:
    obs = ObservationSpec(shape, (DimensionProperty.UNSPECIFIED,) * 3, ObservationType.DEFAULT, "camera")
    return BehaviorSpec([obs], ActionSpec(0, (2,)))


def _time(call: Callable[[], object], repeats: int) -> tuple[list[float], list[float]]:
    for _ in range(5):
        call()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return wall, cpu


def _torch_act(net: ActorCritic, images: torch.Tensor) -> torch.Tensor:
    return net.distribution([images], None).sample_discrete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    print(f"batch {args.batch}, {args.repeats} calls each; ms per call: median / best")
    print(f"{'encoder':16} {'image':9} {'numpy wall':>14} {'numpy cpu':>14} {'torch wall':>14}")
    for kind, shape in CASES:
        net = ActorCritic(_spec(shape), NetworkSettings(hidden_units=32, num_layers=1, vis_encode_type=kind))  # type: ignore[arg-type]
        muscle = Muscle(net.muscle_weights(), seed=0)
        images = rng.random((args.batch, *shape), dtype=np.float32)
        wall, cpu = _time(partial(muscle.act, [images], None), args.repeats)
        tensor = torch.as_tensor(images)
        with torch.no_grad():
            torch_wall, _ = _time(partial(_torch_act, net, tensor), args.repeats)

        def ms(xs: list[float]) -> str:
            return f"{statistics.median(xs) * 1e3:6.2f} /{min(xs) * 1e3:6.2f}"

        size = "x".join(str(n) for n in shape)
        print(f"{kind:16} {size:9} {ms(wall):>14} {ms(cpu):>14} {ms(torch_wall):>14}")


if __name__ == "__main__":
    main()
