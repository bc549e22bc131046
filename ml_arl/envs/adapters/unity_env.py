"""Unity builds and the Unity Editor as environments, through mlagents-envs' UnityEnvironment.

``UnityBuildEnv`` is mlagents-envs' ``UnityEnvironment`` with three changes:
  * the gRPC server our process opens for the build listens on loopback only (``localhost``)
    unless ``env_settings.listen_address`` names another address; mlagents-envs binds every
    interface, which exposes an unauthenticated port to the network;
  * waiting for the build wakes up at most every second to check that the process still
    lives (mlagents-envs checks every ``timeout_wait // 10`` s, which is a busy loop below
    10 s and notices a crashed build only after 6 s by default); its messages are one line
    and name the worker and port; once a build has not answered in time, closing the
    environment kills it at once (mlagents-envs waits another timeout_wait for it to exit);
  * an incompatible communication version is an ``EnvironmentSourceError`` (a user error, not
    restartable), not a multi-line UnityEnvironmentException.
A launched build is tied to its worker process: on Linux it receives SIGKILL when the worker
dies (PR_SET_PDEATHSIG, set by util-linux's setpriv where installed), so a worker killed after a hang never leaves a Unity process behind
(mlagents-envs starts builds in their own session, where nothing else would stop them).
It owns the three side channels a trainer uses: engine configuration and environment
parameters (sent with the first reset) and stats (read by the EnvRunner after every batch).
With ``fast_bridge`` on (the default, ``FAST_BRIDGE_DEFAULT``), steps and resets exchange raw
protobuf wire bytes (ml_arl.envs.adapters.unity_fast) instead of the generated (pure-Python, slow)
message classes; results are identical, off is mlagents-envs' own path.
Either way, images a build sends channels-first (com.unity.ml-agents 3.x) reach the trainer as
(height, width, channels), as a 2.x build's do, with behavior specs that say so
(ml_arl.protocol.image_layout).

This module runs in worker processes: no torch.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import grpc
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.exception import UnityEnvironmentException, UnityTimeOutException, UnityWorkerInUseException
from mlagents_envs.rpc_communicator import RpcCommunicator, UnityToExternalServicerImplementation
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel
from mlagents_envs.side_channel.stats_side_channel import StatsAggregationMethod, StatsSideChannel

from ml_arl.core.exceptions import EditorNotConnectedError, EnvironmentSourceError
from ml_arl.envs.adapters import unity_fast
from ml_arl.protocol import image_layout
from ml_arl.protocol.communicator_objects.unity_to_external_pb2_grpc import add_UnityToExternalProtoServicer_to_server

logger = logging.getLogger(__name__)

EDITOR_PORT = UnityEnvironment.DEFAULT_EDITOR_PORT  # 5004
MAX_POLL_INTERVAL_S = 1.0
FAST_BRIDGE_DEFAULT = True  # UnityBuildEnv / make_unity_env with fast_bridge=None


def grpc_address(host: str, port: int) -> str:
    """host:port for gRPC; IPv6 literals get brackets."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def port_is_free(port: int, host: str = "localhost") -> bool:
    """Nothing listens on ``port`` (the check mlagents-envs makes, done before any worker starts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free to us
        try:
            s.bind(("localhost" if host in ("localhost", "0.0.0.0", "::", "[::]") else host, port))
        except OSError:
            return False
    return True


class _Communicator(RpcCommunicator):
    """RpcCommunicator bound to ``address`` (loopback by default), with a sleeping poll."""

    def __init__(self, worker_id: int, base_port: int, timeout_wait: int, address: str):
        self.address = address
        self.timed_out = False  # the build once did not answer within timeout_wait (see UnityBuildEnv.close)
        super().__init__(worker_id, base_port, timeout_wait)

    def create_server(self) -> None:
        self.check_port(self.port)
        try:
            # so_reuseport off: a second trainer on the same port must fail, not share it
            self.server = grpc.server(ThreadPoolExecutor(max_workers=2), options=(("grpc.so_reuseport", 0),))
            self.unity_to_external = self._add_servicer(self.server)
            if not self.server.add_insecure_port(grpc_address(self.address, self.port)):
                raise OSError(f"cannot listen on {grpc_address(self.address, self.port)}")
            self.server.start()
            self.is_open = True
        except Exception as err:
            raise UnityWorkerInUseException(self.worker_id) from err

    def _add_servicer(self, server: grpc.Server) -> Any:
        """mlagents' servicer (messages parsed by the generated classes); see _FastCommunicator."""
        servicer = UnityToExternalServicerImplementation()
        add_UnityToExternalProtoServicer_to_server(servicer, server)
        return servicer

    def poll_for_timeout(self, poll_callback: Optional[Any] = None) -> None:
        deadline = time.monotonic() + self.timeout_wait
        interval = min(MAX_POLL_INTERVAL_S, max(0.05, self.timeout_wait / 10))
        conn = self.unity_to_external.parent_conn
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if conn.poll(min(interval, remaining)):
                return
            if poll_callback is not None:
                poll_callback()  # raises UnityEnvironmentException if the build exited
        self.timed_out = True
        raise UnityTimeOutException(
            f"the Unity environment on port {self.port} did not answer within {self.timeout_wait} s "
            "(--timeout-wait); is it stuck, waiting for input, or built without graphics support on a "
            "headless machine (try --no-graphics)?"
        )


# ---- fast bridge hook (ml_arl.envs.adapters.unity_fast) ----------------------------------------------
class _FastCommunicator(unity_fast.RawExchange, _Communicator):
    """_Communicator whose messages cross the gRPC server as raw bytes (unity_fast.RawExchange)."""


# ---- end of the fast bridge hook --------------------------------------------------------------


class UnityBuildEnv(UnityEnvironment):
    """A Unity player (``file_name``) or the Editor (``file_name=None``, port 5004).
    ``fast_bridge``: steps through ml_arl.envs.adapters.unity_fast (None: FAST_BRIDGE_DEFAULT)."""

    def __init__(
        self,
        file_name: Optional[str],
        worker_id: int = 0,
        base_port: Optional[int] = None,
        seed: int = 0,
        no_graphics: bool = False,
        timeout_wait: int = 60,
        additional_args: Optional[list[str]] = None,
        log_folder: Optional[str] = None,
        num_areas: int = 1,
        engine: Optional[Mapping[str, Any]] = None,
        environment_parameters: Optional[Mapping[str, Any]] = None,
        listen_address: str = "localhost",
        fast_bridge: Optional[bool] = None,
    ):
        self._listen_address = listen_address
        self.port_claim: Optional[Any] = None  # a port held on a Ray node (unity_nodes): released by close()
        # behavior name -> observations its build sends channels-first (unity_fast.chw_table)
        self.chw_observations: dict[str, tuple[int, ...]] = {}
        self.fast_bridge = FAST_BRIDGE_DEFAULT if fast_bridge is None else bool(fast_bridge)
        self.engine_channel = EngineConfigurationChannel()
        if engine:
            self.engine_channel.set_configuration_parameters(**engine)
        self.parameters_channel = EnvironmentParametersChannel()
        for key, value in (environment_parameters or {}).items():
            send_parameter(self.parameters_channel, key, value)
        self.stats_channel = StatsSideChannel()
        if log_folder and file_name:  # the Editor writes no Player log: nothing to create for it
            os.makedirs(log_folder, exist_ok=True)
        where = f"the Unity build {file_name}" if file_name else f"the Unity Editor on port {EDITOR_PORT}"
        try:
            super().__init__(
                file_name=file_name,
                worker_id=worker_id,
                base_port=base_port if file_name else EDITOR_PORT,
                seed=seed,
                no_graphics=no_graphics,
                timeout_wait=timeout_wait,
                additional_args=additional_args,
                side_channels=[self.engine_channel, self.parameters_channel, self.stats_channel],
                log_folder=log_folder,
                num_areas=num_areas,
            )
        except UnityTimeOutException:
            if file_name:
                raise  # a build that does not answer: restartable
            # Editor mode: nobody pressed Play in time; a restart would only wait again
            raise EditorNotConnectedError(
                f"nothing connected to port {EDITOR_PORT} within {timeout_wait} s (--timeout-wait): press Play in "
                "the Unity Editor within that time after starting arl-learn (or raise --timeout-wait), or pass "
                "--env to train a build"
            ) from None
        except UnityEnvironmentException as err:
            if "communication API version" in str(err):
                raise EnvironmentSourceError(
                    f"{where} speaks an incompatible communication API ({_unity_version(err)}); ml_arl "
                    f"speaks {UnityEnvironment.API_VERSION} (com.unity.ml-agents 2.x and 3.x): rebuild the "
                    "project with one of those packages"
                ) from None
            raise UnityEnvironmentException(f"{where}: {str(err).splitlines()[0]}") from None

    def _get_communicator(self, worker_id: int, base_port: int, timeout_wait: int) -> RpcCommunicator:  # type: ignore[override]
        kind = _FastCommunicator if self.fast_bridge else _Communicator  # fast bridge hook
        return kind(worker_id, base_port, timeout_wait, self._listen_address)

    # ---- fast bridge hook: with fast_bridge off, mlagents-envs' step and reset ----
    def reset(self) -> None:
        if self.fast_bridge:
            unity_fast.reset(self)
        else:
            super().reset()

    def step(self) -> None:
        if self.fast_bridge:
            unity_fast.step(self)
        else:
            super().step()

    # ---- images in either layout (ml_arl.protocol.image_layout), mlagents-envs' path ----
    def _update_behavior_specs(self, output: Any) -> None:
        """mlagents-envs' specs of new behaviors, with channels-first images described as the
        (H, W, C) arrays _update_state makes of them."""
        super()._update_behavior_specs(output)
        brains = output.rl_initialization_output.brain_parameters
        for name in dict.fromkeys(b.brain_name for b in brains):
            if output.rl_output.agentInfos[name].value:  # mlagents-envs has just read its spec
                unity_fast.set_behavior_spec(self, name, self._env_specs[name])

    def _update_state(self, output: Any) -> None:
        for name, chw in self.chw_observations.items():
            if name in output.agentInfos:
                image_layout.protos_to_hwc(output.agentInfos[name].value, chw)
        super()._update_state(output)

    def close(self) -> None:
        try:
            if self._loaded and getattr(self._communicator, "timed_out", False):
                # a build that did not answer within --timeout-wait will not act on the close message
                # either: kill it now instead of waiting another --timeout-wait for it to exit
                self._close(timeout=0)
            else:
                super().close()
        finally:
            claim, self.port_claim = self.port_claim, None
            if claim is not None:
                claim.release()

    def set_environment_parameters(self, params: Mapping[str, Any]) -> None:
        """New environment_parameters (a phase switch); the build reads them with the next reset."""
        for key, value in params.items():
            send_parameter(self.parameters_channel, key, value)

    def take_environment_stats(self) -> dict[str, list[tuple[float, StatsAggregationMethod]]]:
        """Stats the build sent through the stats side channel since the last call."""
        return dict(self.stats_channel.get_and_reset_stats())


def _unity_version(err: Exception) -> str:
    text = str(err)
    marker = "Unity API: "
    if marker in text:
        return "Unity API " + text.split(marker, 1)[1].split()[0].rstrip(".")
    return text.splitlines()[0]


SAMPLER_TYPES = {"uniform": 0, "gaussian": 1, "multirangeuniform": 2}


def send_parameter(channel: EnvironmentParametersChannel, key: str, value: Any) -> None:
    """A float, or a sampler {sampler_type, sampler_parameters: {..., seed}} as settings validated it."""
    if isinstance(value, (int, float)):
        channel.set_float_parameter(key, float(value))
        return
    kind = value["sampler_type"]
    params = value["sampler_parameters"]
    seed = int(params["seed"])
    if kind == "constant":
        channel.set_float_parameter(key, float(params["value"]))
    elif kind == "uniform":
        channel.set_uniform_sampler_parameters(key, float(params["min_value"]), float(params["max_value"]), seed)
    elif kind == "gaussian":
        channel.set_gaussian_sampler_parameters(key, float(params["mean"]), float(params["st_dev"]), seed)
    elif kind == "multirangeuniform":
        intervals = [(float(lo), float(hi)) for lo, hi in params["intervals"]]
        channel.set_multirangeuniform_sampler_parameters(key, intervals, seed)
    else:  # settings validation makes this unreachable
        raise ValueError(f"environment_parameters.{key}: unknown sampler_type {kind!r}")


def _die_with_parent_prefix() -> list[str]:
    """util-linux's setpriv sets PR_SET_PDEATHSIG and execs the build (same pid), so no Python
    code runs between fork and exec in this multi-threaded (gRPC) process."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def _launch_executable(file_name: str, args: list[str]) -> subprocess.Popen[bytes]:
    """mlagents-envs' launch_executable, plus: the build dies with the worker (Linux)."""
    from mlagents_envs import env_utils

    launch = env_utils.validate_environment_path(file_name)
    if launch is None:
        raise UnityEnvironmentException(f"Couldn't launch the {file_name} environment: no such build")
    quiet = env_utils.logger.getEffectiveLevel() > logging.DEBUG
    try:
        return subprocess.Popen(
            [*_die_with_parent_prefix(), launch, *args],
            start_new_session=True,  # Ctrl-C in the terminal is for the trainer, which closes the build
            stdout=subprocess.DEVNULL if quiet else None,
            stderr=subprocess.DEVNULL if quiet else None,
        )
    except PermissionError as err:
        raise UnityEnvironmentException(f"cannot run {launch} ({err}); run chmod +x {launch}") from None


def make_unity_env(
    file_name: Optional[str],
    worker_id: int,
    seed: int,
    base_port: int,
    no_graphics: bool,
    no_graphics_monitor: bool,
    timeout_wait: int,
    additional_args: list[str],
    log_folder: Optional[str],
    num_areas: int,
    engine: dict[str, Any],
    environment_parameters: dict[str, Any],
    listen_address: str,
    debug: bool = False,
    fast_bridge: Optional[bool] = None,
) -> UnityBuildEnv:
    """The factory a worker calls (see ml_arl.envs.sources). The build's own stdout/stderr and
    mlagents-envs' info lines are shown only with --debug (the build's log is in run_logs).
    ``fast_bridge``: see UnityBuildEnv (None: FAST_BRIDGE_DEFAULT)."""
    from mlagents_envs import logging_util

    logging_util.set_log_level(logging_util.DEBUG if debug else logging_util.WARNING)
    from mlagents_envs import env_utils

    env_utils.launch_executable = _launch_executable  # this worker process only
    return UnityBuildEnv(
        file_name,
        worker_id=worker_id,
        base_port=base_port,
        seed=seed,
        no_graphics=no_graphics or (no_graphics_monitor and worker_id != 0),
        timeout_wait=timeout_wait,
        additional_args=additional_args,
        log_folder=log_folder,
        num_areas=num_areas,
        engine=engine,
        environment_parameters=environment_parameters,
        listen_address=listen_address,
        fast_bridge=fast_bridge,
    )
