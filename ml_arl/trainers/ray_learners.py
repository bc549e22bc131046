"""``--num-learners`` on Ray (``manager: ray``, ``--ray-address``): the learners 1..N-1 are Ray
actors of the run's Ray, placed where the cluster has a CPU free (``num_cpus=1`` each), and join
rank 0's gloo group over TCP at rank 0's node address. Each actor runs
``ml_arl.trainers.learner_main.serve`` until rank 0 asks it to stop; an actor that raises or whose
node is lost fails rank 0's next collective, and the run stops with one line naming it. Ray must be
running in this process (the Ray env manager started or joined it).
"""

from __future__ import annotations

import logging
import socket
from typing import Any, Optional

logger = logging.getLogger(__name__)

STOP_TIMEOUT_S = 10.0


def _actor_class() -> Any:
    import ray

    @ray.remote(num_cpus=1)
    class RayLearner:
        def serve(self, init_method: str, rank: int, world: int, timeout_s: float) -> None:
            from ml_arl.trainers.learner_main import serve

            serve(init_method, rank, world, timeout_s)

    return RayLearner


class RayLearners:
    def __init__(self, init_method: str, world: int, timeout_s: float):
        import ray

        if not ray.is_initialized():
            raise RuntimeError("the learners go on Ray only where the run's Ray is running (manager: ray)")
        cls = _actor_class()
        self.actors = [cls.options(name=None).remote() for _ in range(1, world)]  # type: ignore[attr-defined]
        self.refs = [actor.serve.remote(init_method, rank, world, timeout_s) for rank, actor in enumerate(self.actors, start=1)]
        logger.debug("Started %d learner actor(s) on Ray; they join at %s", world - 1, init_method)

    @staticmethod
    def init_method() -> str:
        """tcp:// at this node's address (the one Ray's other nodes reach it by) and a free port."""
        import ray

        host = ray.util.get_node_ip_address()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        return f"tcp://{host}:{port}"

    def _finished(self) -> list[tuple[int, Any]]:
        import ray

        ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=0)
        return [(self.refs.index(ref) + 1, ref) for ref in ready]

    def alive(self) -> bool:
        return not self._finished()

    def dead(self, during: str) -> Optional[str]:
        import ray

        for rank, ref in self._finished():
            try:
                ray.get(ref, timeout=1.0)
                how = "it returned"
            except Exception as err:  # noqa: BLE001 - Ray's errors (actor died, task raised) become one line
                lines = [line for line in str(err).strip().splitlines() if line.strip()]
                how = f"{type(err).__name__}: {lines[-1] if lines else ''}".rstrip(": ")
            return f"learner {rank} (a Ray actor) stopped {during} ({how}); its output is in Ray's logs"
        return None

    def stop(self) -> None:
        import ray

        ray.wait(list(self.refs), num_returns=len(self.refs), timeout=STOP_TIMEOUT_S)
        for actor in self.actors:
            ray.kill(actor)
