"""Adapters: Unity builds, gymnasium and PettingZoo environments seen as mlagents_envs BaseEnvs."""
