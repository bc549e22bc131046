"""ml_arl: reinforcement learning for Unity builds, Python environments and adversarial scenarios."""

__version__ = "0.1.0"
