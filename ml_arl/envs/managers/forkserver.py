"""How worker processes are started: from a forkserver, started early.

Workers fork from a clean server process (no trainer threads, no torch), which is safe and fast;
``spawn`` where forkserver does not exist. The server imports what every worker needs once
(numpy, mlagents_envs, gymnasium, the built-in envs) instead of each worker importing it after
the fork. ``prestart()`` boots the server in the background as soon as the config is known to
ask for subprocess workers, so that by the time the workers are launched it is ready. This
module imports only the standard library: it runs before anything heavy is loaded.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

# Workers share the machine's cores: one BLAS thread each (set before the forkserver starts).
_SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
PRELOAD = ["ml_arl.envs.managers.subprocess_worker", "ml_arl.envs.games.builtin", "ml_arl.envs.adapters.gym_env"]


def worker_context() -> Any:  # a forkserver or spawn context (typeshed types them apart)
    for var in _SINGLE_THREAD_ENV:
        os.environ.setdefault(var, "1")
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def prestart() -> None:
    """Start the forkserver now (it boots while this process goes on); a no-op without one."""
    if worker_context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
