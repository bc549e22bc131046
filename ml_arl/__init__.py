"""ml_arl: reinforcement learning for Unity builds, Python environments and adversarial scenarios."""

__version__ = "0.1.0"

from ml_arl.protocol import install_aliases as _install_aliases

# mlagents-envs' modules get our generated Unity messages (ml_arl/protocol/__init__.py says why)
_install_aliases()
