"""Records tests/data/exchanges/<name>.bin: the bytes mlagents-envs 0.28.0's own generated classes
write for the messages of tests/support/protocol_samples.py, and tests/data/communicator_objects_0.28.pb:
the FileDescriptorSet of all its communicator_objects modules (what ml_arl/protocol's .proto files
were rebuilt from). Run once, where mlagents-envs' modules import
(protobuf 3.20.x); tests/protocol/test_protocol.py compares ml_arl's generated classes against these bytes.

    pip install "mlagents-envs==0.28.0" "protobuf==3.20.3" && python tests/data/record_exchanges.py

It imports nothing of ml_arl (whose import redirects mlagents-envs to ml_arl's messages).
"""

import importlib
import importlib.util
import pkgutil
from pathlib import Path

from google.protobuf import descriptor_pb2

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("protocol_samples", HERE.parent / "protocol_samples.py")
assert spec is not None and spec.loader is not None
samples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(samples)

for name, message in samples.build("mlagents_envs.communicator_objects").items():
    (HERE / "exchanges" / f"{name}.bin").write_bytes(message.SerializeToString(deterministic=True))
    print(name, message.ByteSize(), "bytes")

import mlagents_envs.communicator_objects as theirs  # noqa: E402

files = descriptor_pb2.FileDescriptorSet()
seen: set[str] = set()


def add(descriptor) -> None:  # dependencies first
    if descriptor.name in seen:
        return
    for dependency in descriptor.dependencies:
        add(dependency)
    seen.add(descriptor.name)
    descriptor.CopyToProto(files.file.add())


for module in pkgutil.iter_modules(theirs.__path__):
    if module.name.endswith("_pb2"):
        add(importlib.import_module(f"{theirs.__name__}.{module.name}").DESCRIPTOR)
(HERE / "communicator_objects_0.28.pb").write_bytes(files.SerializeToString())
print(len(files.file), "files in communicator_objects_0.28.pb")
