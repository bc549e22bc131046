"""The Unity ML-Agents communication messages (communication API 1.5.0), generated here.

``ml_arl/protocol/communicator_objects/*.proto`` are com.unity.ml-agents' ``communicator_objects``
definitions, rebuilt from the serialized descriptors embedded in mlagents-envs 0.28.0's generated
modules (field for field, checked by tests/protocol/test_protocol.py against those descriptors, kept in
tests/data/communicator_objects_0.28.pb). Only the file paths changed (``mlagents_envs/...`` ->
``ml_arl/protocol/...``): the proto package, message names, field numbers and the gRPC service
(``/communicator_objects.UnityToExternalProto/Exchange``) are Unity's, so the bytes on the wire
are the same. ``make protos`` regenerates the ``*_pb2.py``/``*_pb2.pyi`` and the service module
with grpcio-tools; the generated files are checked in.

Why: mlagents-envs 0.28's own generated modules need protobuf 3.x ("Descriptors cannot be
created directly" from 4.0 on), which would pin every user's protobuf. mlagents-envs stays our
environment interface (BaseEnv, DecisionSteps, ActionTuple, side channels, UnityEnvironment),
and its modules that import ``mlagents_envs.communicator_objects.<name>`` get these modules
instead: ``install_aliases()`` (called from ``ml_arl/__init__.py``) puts a finder on
``sys.meta_path`` that answers those imports with ours, lazily (nothing is imported until a
module asks). Both sets can never be loaded together: they define the same message names in
protobuf's default pool.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Optional

OURS = "ml_arl.protocol.communicator_objects"
THEIRS = "mlagents_envs.communicator_objects"


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        from ml_arl.core.import_path import load_module

        module: ModuleType = load_module(self.target)
        return module

    def exec_module(self, module: ModuleType) -> None:
        pass  # already executed under its own name


class _MessagesFinder(importlib.abc.MetaPathFinder):
    """``mlagents_envs.communicator_objects.X_pb2`` (and ``_pb2_grpc``) -> ``ml_arl.protocol.communicator_objects.X...``."""

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        package, _, name = fullname.rpartition(".")
        if package != THEIRS or not name.endswith(("_pb2", "_pb2_grpc")):
            return None
        ours = f"{OURS}.{name}"
        if importlib.util.find_spec(ours) is None:
            return None  # a module we do not generate: let mlagents-envs' own be found (and fail loudly)
        return importlib.machinery.ModuleSpec(fullname, _Alias(ours))


_FINDER = _MessagesFinder()


def install_aliases() -> None:
    """Make mlagents-envs import our generated messages (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
