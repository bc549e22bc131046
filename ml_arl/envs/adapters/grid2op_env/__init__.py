"""Grid2Op power grids (``--env grid2op:<name>``): the L2RPN operator as the behavior ``Operator``,
and with ``opponent=true`` a line-attacking ``Opponent`` as a second behavior (docs/grid2op.md).

This part imports no grid2op: the options, their defaults and checks.
ml_arl.envs.sources.grid2op_source checks the name and the ``--env-args`` with them, so that a missing extra, an unknown name or a bad
option is one line before any worker starts. The environment itself is ``adapter`` (built in the
workers).

``--env-args`` (all optional):
  opponent                 false (none), true / agent (the Opponent behavior), random (grid2op's
                           RandomLineOpponent inside the environment, no second behavior)
  attack_lines             the lines an opponent may attack: a list of names (quoted: YAML reads
                           1_3_3 as 133) or of line ids, or ``all``; default
                           case14's six (DEFAULT_ATTACK_LINES) when the grid has them, else all
  attack_duration          steps an attack keeps its line out (48: 4 hours)
  attack_cooldown          steps between two attacks (48)
  attack_budget            the opponent's initial budget (144; an attack costs 1 per step it lasts)
  attack_budget_per_step   budget gained each step (0.5)
  reward                   survival (+1 a step the grid survives) or grid2op (the grid's reward class)
  observation              subset (documented features) or vect (obs.to_vect(), raw)
  topology_max_elements    substations with at most this many elements get topology actions (5)
  redispatch               +/- redispatch actions on the redispatchable generators (true)
  redispatch_step          each redispatch action's size, a fraction of the generator's max ramp (1.0)
  backend                  lightsim (lightsim2grid, else pandapower when it does not import) or pandapower
  safe_max_rho             none, or a line load (0.95): below it the expert rule plays (reconnect a line
                           when one may be, else do nothing) and the Operator decides only once the highest
                           line load reaches it (l2rpn-baselines' safe_max_rho); with an Opponent behavior
                           (opponent=true) it still decides every step, the Operator only at or above it
  simulate                 false, or true: the Operator gets a second observation (``simulated_rho``), for each
                           of its actions the highest line load grid2op's ``obs.simulate`` forecasts one step
                           after it (10 where it is not allowed or the forecast is a game over); the
                           ``grid2op_greedy`` rule plays on it
"""

from __future__ import annotations

import warnings
from typing import Any

INSTALL_HINT = "pip install 'ml_arl[grid2op]'"
DEFAULT_ATTACK_LINES = ("1_3_3", "1_4_4", "3_6_15", "9_10_12", "11_12_13", "12_13_14")  # grid2op's rte_case14_opponent
OPTIONS: dict[str, Any] = {
    "opponent": False,
    "attack_lines": None,
    "attack_duration": 48,
    "attack_cooldown": 48,
    "attack_budget": 144.0,
    "attack_budget_per_step": 0.5,
    "reward": "survival",
    "observation": "subset",
    "topology_max_elements": 5,
    "redispatch": True,
    "redispatch_step": 1.0,
    "backend": "lightsim",
    "safe_max_rho": None,
    "simulate": False,
}
RHO_LIMIT = 2.0
OPPONENT_MODES = {False: "none", None: "none", "none": "none", "false": "none", True: "agent", "true": "agent",
                  "agent": "agent", "random": "random"}


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options with their defaults, checked; ValueError (one line) on an unknown or bad one."""
    unknown = sorted(set(options) - set(OPTIONS) - {"seed"})
    if unknown:
        raise ValueError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                         f"Grid2Op environments take {', '.join(OPTIONS)}")
    out = {**OPTIONS, **{k: v for k, v in options.items() if k != "seed"}}
    mode = out["opponent"]
    key = mode.lower() if isinstance(mode, str) else mode
    if key not in OPPONENT_MODES:
        raise ValueError(f"opponent={mode!r}: expected false, true (the Opponent behavior) or random")
    out["opponent"] = OPPONENT_MODES[key]
    for name in ("attack_duration", "attack_cooldown", "topology_max_elements"):
        if isinstance(out[name], bool) or not isinstance(out[name], int) or out[name] < (1 if name == "attack_duration" else 0):
            raise ValueError(f"{name}={out[name]!r}: expected a whole number of steps (elements) >= "
                             f"{1 if name == 'attack_duration' else 0}")
    for name in ("attack_budget", "attack_budget_per_step", "redispatch_step"):
        if isinstance(out[name], bool) or not isinstance(out[name], (int, float)) or out[name] < 0:
            raise ValueError(f"{name}={out[name]!r}: expected a number >= 0")
        out[name] = float(out[name])
    if out["reward"] not in ("survival", "grid2op"):
        raise ValueError(f"reward={out['reward']!r}: expected survival or grid2op")
    if out["observation"] not in ("subset", "vect"):
        raise ValueError(f"observation={out['observation']!r}: expected subset or vect")
    if out["backend"] not in ("lightsim", "pandapower"):
        raise ValueError(f"backend={out['backend']!r}: expected lightsim or pandapower")
    for name in ("redispatch", "simulate"):
        if not isinstance(out[name], bool):
            raise ValueError(f"{name}={out[name]!r}: expected true or false")
    rho = out["safe_max_rho"]
    if rho is not None:
        if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not 0.0 < rho <= RHO_LIMIT:
            raise ValueError(f"safe_max_rho={rho!r}: expected a line load above 0 and at most {RHO_LIMIT:g} (0.95: 95 %)")
        out["safe_max_rho"] = float(rho)
    lines = out["attack_lines"]
    if not (lines is None or lines == "all" or (isinstance(lines, list) and lines
                                                and all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in lines))):
        raise ValueError(f"attack_lines={lines!r}: expected a list of line names (quoted: ['1_3_3', '1_4_4']) "
                         "or line ids ([3, 4]), or all")
    return out


def import_grid2op() -> Any:
    """grid2op, imported without its import-time warnings (numba); ImportError when the extra is missing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import grid2op
    return grid2op
