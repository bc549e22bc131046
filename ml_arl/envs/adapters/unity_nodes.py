"""Unity builds launched by Ray actors on their own nodes (env_settings.manager: ray).

With the Ray backend the driver cannot know what another node has, so ``sources.unity_factory``
checks nothing about the build and hands ``make_unity_env_on_node`` to the actors. There, in the
actor's process on its node:
  * the build is looked up at the path the driver gave (absolute, as resolved on the driver;
    the .x86_64 / .x86 extensions may be left out, as everywhere) and must be executable; either
    failure is an ``EnvironmentSourceError`` naming the node and the path (one line, exit code 2
    through arl-learn, never restarted);
  * the port is claimed on the node: the first port from ``--base-port`` up that no other actor
    of any run on this node holds (an exclusive ``flock`` on a file of the node's temp folder,
    held until the environment closes or the actor's process dies) and that nothing else listens
    on. So actors on one node never collide, nor do two runs sharing nodes, whatever their
    ``--base-port``; a worker's port is not ``base_port + worker_id`` but whatever its node gave.

This module runs in worker processes: no torch.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import tempfile
from typing import Any, Optional

from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.adapters.unity_env import UnityBuildEnv, make_unity_env, port_is_free

logger = logging.getLogger(__name__)

PORT_SCAN = 1000  # ports tried from --base-port up on one node
LOCK_FOLDER = "ml_arl-ports"  # in the node's temp folder: one lock file per claimed port


def this_node() -> str:
    """The node this process runs on, named as the Ray backend's log names it (address and the
    node id's first 8 characters); the host name outside Ray."""
    try:
        import ray

        if ray.is_initialized():
            return f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
    except Exception:  # noqa: BLE001 - a name for a message: never a failure of its own
        pass
    return socket.gethostname()


class PortClaim:
    """A port held on this node: the lock file stays locked until ``release()`` (or this process ends)."""

    def __init__(self, port: int, fd: int):
        self.port = port
        self._fd: Optional[int] = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor drops the flock


def lock_folder() -> str:
    folder = os.path.join(tempfile.gettempdir(), LOCK_FOLDER)
    try:
        os.mkdir(folder)
        os.chmod(folder, 0o1777)  # every user's runs share the node's ports
    except FileExistsError:
        pass
    return folder


def claim_port(base_port: int, host: str = "localhost", node: str = "", scan: int = PORT_SCAN) -> PortClaim:
    """The first port from ``base_port`` up (at most ``scan`` of them, not past 65535) that no
    other claim on this node holds and nothing listens on."""
    folder = lock_folder()
    last = min(65535, base_port + scan - 1)
    for port in range(base_port, last + 1):
        fd = os.open(os.path.join(folder, f"{port}.lock"), os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue  # another actor (of this run or another) holds it
            raise
        if port_is_free(port, host):
            return PortClaim(port, fd)
        os.close(fd)
    raise EnvironmentSourceError(
        f"--base-port {base_port}: no free port from {base_port} to {last} on Ray node {node or this_node()}; "
        "pick another range with --base-port"
    )


def check_build_on_node(file_name: str, node: str) -> str:
    """The executable to launch for ``file_name`` on this node, or a one-line error naming both."""
    from mlagents_envs import env_utils

    launch = env_utils.validate_environment_path(file_name)
    if launch is None or os.path.isdir(launch):
        raise EnvironmentSourceError(
            f"--env {file_name}: no Unity build found there on Ray node {node} (also tried the .x86_64 and .x86 "
            "extensions); every node needs the build at this path"
        )
    if not os.access(launch, os.X_OK):
        raise EnvironmentSourceError(
            f"--env {file_name}: {launch} is not executable on Ray node {node}; run chmod +x {launch} there"
        )
    return launch


def make_unity_env_on_node(file_name: str, worker_id: int, base_port: int, listen_address: str, **kwargs: Any) -> UnityBuildEnv:
    """The factory a Ray actor calls: check the build here, claim a port here, launch the build.
    ``kwargs`` are make_unity_env's other arguments."""
    node = this_node()
    check_build_on_node(file_name, node)
    claim = claim_port(base_port, listen_address, node)
    logger.info("worker %d: Unity build %s on Ray node %s, port %d", worker_id, file_name, node, claim.port)
    try:
        # mlagents-envs listens on base_port + worker_id: the claimed port, with the worker's own id
        # (its Player-<id>.log, no_graphics_monitor's worker 0)
        env = make_unity_env(
            file_name=file_name, worker_id=worker_id, base_port=claim.port - worker_id,
            listen_address=listen_address, **kwargs,
        )
    except BaseException:
        claim.release()
        raise
    env.port_claim = claim
    return env
