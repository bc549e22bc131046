"""ml_arl: reinforcement learning for Unity builds, Python environments and adversarial scenarios."""

__version__ = "0.1.0"

from ml_arl.protocol import install_aliases as _install_aliases

# mlagents-envs' modules get our generated Unity messages (ml_arl/protocol/__init__.py says why)
_install_aliases()

# The Python API (docs/python-api.md), imported on first use so that `import ml_arl` stays light
_API = {
    "train": "ml_arl.api.train",
    "Run": "ml_arl.api.train",
    "load_policy": "ml_arl.api.inference",
    "evaluate": "ml_arl.api.inference",
    "make_env": "ml_arl.api.inference",
    "make_vec_env": "ml_arl.api.vector_env",
    "Callback": "ml_arl.training.callbacks",
    "StopTraining": "ml_arl.training.callbacks",
    "StopOnReward": "ml_arl.training.callbacks",
    "EvalCallback": "ml_arl.api.eval_callback",
    "CheckpointEvery": "ml_arl.training.callbacks",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> object:
    if name in _API:
        from ml_arl.core.import_path import resolve

        return resolve(f"{_API[name]}:{name}")
    raise AttributeError(f"module 'ml_arl' has no attribute {name!r}")
