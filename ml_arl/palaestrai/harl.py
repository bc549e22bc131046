"""palaestrai-agents' (``harl``) brains on our trainers, without harl installed.

harl pins numpy<2 and cannot be installed beside ml_arl. Its PPO and SAC are the algorithms our
PPO and SAC trainers implement, so a run file's ``harl:PPOBrain``/``harl:PPOMuscle`` trains with
``trainer_type: ppo`` and ``harl:SACBrain``/``harl:SACMuscle`` with ``trainer_type: sac``; harl's
parameter names are translated here (docs/palaestrai.md has the table). A harl parameter without a
counterpart is a warning line that names it; TD3 and DDPG are a one-line error.
"""

from __future__ import annotations

from typing import Any, Optional

HARL_TRAINERS = {"PPOBrain": "ppo", "SACBrain": "sac"}
HARL_MUSCLES = {"PPOBrain": "PPOMuscle", "SACBrain": "SACMuscle"}
NOT_OURS = ("TD3Brain", "DDPGBrain")


def harl_class(name: str) -> Optional[str]:
    """``harl:PPOBrain`` / ``harl.ppo.brain:PPOBrain`` -> ``PPOBrain``; None when not harl's."""
    module, _, cls = name.partition(":")
    if module == "harl" or module.startswith("harl."):
        return cls
    return None


def _fc(dims: Any, where: str, warnings: list[str]) -> dict[str, Any]:
    dims = [int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    if not dims:
        return {"num_layers": 0}
    if len(set(dims)) > 1:
        warnings.append(f"{where}: fc_dims {dims}: our networks have layers of one width; using {max(dims)} for all {len(dims)}")
    return {"hidden_units": max(dims), "num_layers": len(dims)}


def translate(agent: str, brain: str, brain_params: dict[str, Any], muscle_params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(our behavior settings, warning lines) for harl ``brain`` (``PPOBrain`` or ``SACBrain``)."""
    where = f"agent {agent!r} ({brain})"
    warnings: list[str] = []
    hp: dict[str, Any] = {}
    net: dict[str, Any] = {}
    extrinsic: dict[str, Any] = {"gamma": 0.99, "strength": 1.0}
    if brain == "PPOBrain":
        # harl's defaults where ours differ, so an unset key means what it means in harl
        p: dict[str, Any] = {"rollout_size": 96, "epochs": 50, "batch_size": 4, "actor_lr": 3e-4, "clip": 0.2,
             "entropy_coef": 0.01, "gamma": 0.99, "gae_lambda": 0.95, "fc_dims": [256, 256], "max_grad_norm": 0.5}
        p.update(brain_params)
        hp.update(buffer_size=int(p.pop("rollout_size")), num_epoch=int(p.pop("epochs")),
                  batch_size=int(p.pop("batch_size")), learning_rate=float(p.pop("actor_lr")),
                  epsilon=float(p.pop("clip")), beta=float(p.pop("entropy_coef")), lambd=float(p.pop("gae_lambda")),
                  max_grad_norm=float(p.pop("max_grad_norm")), max_grad_norm_per_network=True,
                  learning_rate_schedule="constant",
                  epsilon_schedule="constant", beta_schedule="constant")
        hp["batch_size"] = min(hp["batch_size"], hp["buffer_size"])
        extrinsic["gamma"] = float(p.pop("gamma"))
        net = _fc(p.pop("fc_dims"), where, warnings)
        # harl's critic and continuous actor: tanh layers, orthogonal initialisation (its discrete actor: ReLU)
        net.update(normalize=False, activation="tanh")
        time_horizon = hp["buffer_size"]
    else:
        p = {"replay_size": 1_000_000, "fc_dims": [256, 256], "gamma": 0.99, "polyak": 0.995, "lr": 3e-4,
             "gradient_steps": -1, "batch_size": 100, "update_after": 1000, "update_every": 50}
        p.update(brain_params)
        update_every = max(1, int(p.pop("update_every")))
        gradient_steps = int(p.pop("gradient_steps"))
        gradient_steps = update_every if gradient_steps <= 0 else gradient_steps
        start_steps = int(muscle_params.get("start_steps", 10000))
        hp.update(buffer_size=int(p.pop("replay_size")), learning_rate=float(p.pop("lr")),
                  tau=round(1.0 - float(p.pop("polyak")), 10), batch_size=int(p.pop("batch_size")),
                  buffer_init_steps=max(int(p.pop("update_after")), start_steps),
                  steps_per_update=max(update_every / gradient_steps, 1e-3), learning_rate_schedule="constant")
        extrinsic["gamma"] = float(p.pop("gamma"))
        net = _fc(p.pop("fc_dims"), where, warnings)
        net["normalize"] = False
        time_horizon = 64
    for key in sorted(p):
        warnings.append(f"{where}: harl parameter {key!r} has no counterpart in ml_arl; ignored")
    for key in sorted(set(muscle_params) - {"start_steps", "seed"}):
        warnings.append(f"{where}: harl muscle parameter {key!r} has no counterpart in ml_arl; ignored")
    settings = {
        "trainer_type": HARL_TRAINERS[brain],
        "hyperparameters": hp,
        "network_settings": net,
        "reward_signals": {"extrinsic": extrinsic},
        "time_horizon": time_horizon,
    }
    return settings, warnings
