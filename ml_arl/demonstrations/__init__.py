"""Unity ML-Agents' .demo files: read them (behavioral cloning, GAIL) and write them
(``arl-learn --record-demo``). ``format`` holds the bytes, ``reader`` and ``writer`` the arrays."""

from ml_arl.demonstrations.reader import Demonstrations, check_demonstrations, demo_files, load_demonstrations
from ml_arl.demonstrations.writer import DemoWriter

__all__ = ["DemoWriter", "Demonstrations", "check_demonstrations", "demo_files", "load_demonstrations"]
