"""Pure helpers shared by trainers: GAE, discounted returns, schedules."""

from __future__ import annotations

import numpy as np

# advantages are normalised over the whole update buffer as ML-Agents does (on_policy_trainer.py):
# (A - mean) / (population std + 1e-10), by PPO (torch) and POCA (numpy) alike
ADVANTAGE_EPSILON = 1e-10


def gae(
    rewards: np.ndarray, values: np.ndarray, value_next: float, gamma: float, lambd: float
) -> np.ndarray:
    """Generalised advantage estimates (Schulman et al. 2016) for one trajectory.

    ``value_next`` is V(s_T), the value of the observation after the last step: 0 when the
    episode truly terminated, the critic's estimate when it was cut (time horizon or max-step
    interruption).
    """
    n = rewards.shape[0]
    adv = np.zeros(n, dtype=np.float32)
    last = 0.0
    next_value = value_next
    for t in range(n - 1, -1, -1):
        delta = rewards[t] + gamma * next_value - values[t]
        last = delta + gamma * lambd * last
        adv[t] = last
        next_value = values[t]
    return adv


def discounted_returns(rewards: np.ndarray, gamma: float, value_next: float = 0.0) -> np.ndarray:
    out = np.zeros(rewards.shape[0], dtype=np.float32)
    running = value_next
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def decayed(initial: float, floor: float, step: int, max_steps: int, schedule: str) -> float:
    """ML-Agents' schedules: ``constant`` or ``linear`` (power 1) from initial to floor at max_steps."""
    if schedule == "constant":
        return initial
    frac = min(max(step, 0), max_steps) / max_steps
    return (initial - floor) * (1.0 - frac) + floor


def lambda_returns(rewards: np.ndarray, values: np.ndarray, value_next: float, gamma: float, lambd: float) -> np.ndarray:
    """TD(lambda) returns of one trajectory, as ML-Agents' POCA computes them:
    G_T-1 = r_T-1 + gamma * V(s_T), and G_t = r_t + gamma * ((1 - lambd) * V(s_t+1) + lambd * G_t+1).
    ``value_next`` is V(s_T): 0 once the agent's whole group ended, else the group's value."""
    n = rewards.shape[0]
    out = np.zeros(n, dtype=np.float32)
    following = float(value_next)  # G_t+1, or V(s_T) after the last step
    for t in range(n - 1, -1, -1):
        if t == n - 1:
            out[t] = rewards[t] + gamma * value_next
        else:
            out[t] = rewards[t] + gamma * ((1.0 - lambd) * values[t + 1] + lambd * following)
        following = float(out[t])
    return out
