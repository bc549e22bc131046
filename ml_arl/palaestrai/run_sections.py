"""The sections of a palaestrAI run file, read one by one (ml_arl.palaestrai.runfile puts them
together): environments, the simulation and its termination conditions, agents and their ``load``.
Each reader call collects its problems, one line each, naming where they are.
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any, Optional

from ml_arl.core.import_path import ImportPathError, find, resolve
from ml_arl.palaestrai.definitions import AgentWiring, EnvironmentSpec, PluginSpec, import_problem
from ml_arl.palaestrai.harl import HARL_MUSCLES, HARL_TRAINERS, NOT_OURS, harl_class, translate

ENV_ITEM_KEYS = ("environment", "reward", "state_transformer")
NAME_PARAMS_KEYS = ("name", "uid", "params")
LOAD_KEYS = ("agent", "experiment_run", "phase")
SIMULATION_KEYS = ("name", "conditions")
VANILLA = ("VanillaSimulationController", "VanillaSimController", "Vanilla")
TAKING_TURNS = ("TakingTurnsSimulationController", "TakingTurns")
CONDITIONS = (
    "VanillaRunGovernorTerminationCondition", "VanillaSimControllerTerminationCondition",
    "EnvironmentTerminationCondition", "MaxEpisodesTerminationCondition", "AgentObjectiveTerminationCondition",
)
OBJECTIVE = "ml_arl.palaestrai.objective:EnvironmentObjective"
BRAIN_TRAINER = "ml_arl.palaestrai.agents:BrainTrainer"


def closest_key(key: str, valid: tuple[str, ...]) -> str:
    near = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
    return f"; did you mean {near[0]!r}?" if near else f"; valid keys: {', '.join(valid)}"


class Reader:
    """Collects the problems of one run file, each as one line naming where."""

    def __init__(self, path: str, import_plugins: bool = True):
        self.path = path
        # import each plugin's module to check its class (--check), or only find the module: the
        # class is then checked where it is built (a worker, the brain's trainer), so that the
        # workers are launched before palaestrAI's and the environment's imports are paid here
        self.import_plugins = import_plugins
        self.deferred: list[tuple[str, str]] = []  # (where, name) of each plugin only found
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def import_deferred(self) -> None:
        """Import the plugins this reader only found, each failure a problem."""
        for where, name in self.deferred:
            problem = import_problem(name)
            if problem is not None:
                self.problem(where, problem)
        self.deferred = []

    def problem(self, where: str, text: str) -> None:
        self.problems.append(f"{self.path}: {where}: {text}")

    def keys(self, where: str, data: Any, valid: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.problem(where, f"expected a mapping, got {type(data).__name__}")
            return {}
        for key in data:
            if key not in valid:
                self.problem(where, f"unknown key {key!r}{closest_key(key, valid)}")
        return data

    def plugin(self, where: str, data: Any, check_import: bool = True, uid: bool = False) -> Optional[PluginSpec]:
        data = self.keys(where, data, NAME_PARAMS_KEYS)
        name = data.get("name")
        if not isinstance(name, str) or ":" not in name:
            self.problem(where, f"name must be an import path package.module:Class, got {name!r}")
            return None
        params = data.get("params") or {}
        if not isinstance(params, dict):
            self.problem(f"{where}.params", "expected a mapping")
            params = {}
        if "uid" in data and not uid:
            self.problem(where, f"unknown key 'uid'{closest_key('uid', ('name', 'params'))}")
        if check_import:
            try:
                if self.import_plugins:
                    resolve(name)
                else:
                    find(name)
                    self.deferred.append((where, name))
            except ImportPathError as err:
                self.problem(where, f"{name} does not import: {err}")
                return None
        return PluginSpec(name, dict(params), where=f"{self.path}: {where}")


def phase_names_of(results_dir: str, run: str) -> list[str]:
    try:
        with open(os.path.join(results_dir, run, "run_logs", "phases.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return []
    phases = data.get("phases") if isinstance(data, dict) else data
    names = []
    for p in phases or []:
        names.append(p.get("name") if isinstance(p, dict) else str(p))
    return [n for n in names if n]


def environment_section(reader: Reader, where: str, data: Any) -> Optional[tuple[EnvironmentSpec, ...]]:
    """A phase's environments (each with its uid, reward and state transformer); None when broken."""
    if not isinstance(data, list) or not data:
        reader.problem(f"{where}.environments", "expected a list of environments")
        return None
    specs: list[EnvironmentSpec] = []
    for i, item in enumerate(data):
        ewhere = f"{where}.environments[{i}]"
        item = reader.keys(ewhere, item, ENV_ITEM_KEYS)
        env = item.get("environment")
        if env is None:
            reader.problem(ewhere, "no environment: {name: pkg.module:Class, uid: ..., params: {...}}")
            continue
        spec = reader.plugin(f"{ewhere}.environment", env, uid=True)
        env_uid = env.get("uid") if isinstance(env, dict) else None
        if not isinstance(env_uid, str) or not env_uid:
            reader.problem(f"{ewhere}.environment", "uid missing: an environment needs a uid (its sensor and "
                           "actuator ids start with it)")
            continue
        if any(s.uid == env_uid for s in specs):
            reader.problem(f"{ewhere}.environment.uid", f"{env_uid!r} is the uid of an earlier environment of this phase; "
                           "each environment needs its own (its sensor and actuator ids start with it)")
            continue
        reward = reader.plugin(f"{ewhere}.reward", item["reward"]) if item.get("reward") else None
        transformer = (reader.plugin(f"{ewhere}.state_transformer", item["state_transformer"])
                       if item.get("state_transformer") else None)
        if spec is not None:
            specs.append(EnvironmentSpec(spec.name, env_uid, spec.params, reward, transformer, where=spec.where))
    return tuple(specs) if len(specs) == len(data) else None


def objective_rules(reader: Reader, where: str, params: Any, end_at: dict[str, tuple[int, float]],
                     stop_when: list[dict[str, Any]]) -> None:
    """AgentObjectiveTerminationCondition's params ``{agent: {brain_avgN: X, phase_avgN: Y}}``:
    brain_avgN ends an agent's episode (``end_at``), phase_avgN the phase (our ``stop_when``)."""
    if not isinstance(params, dict):
        reader.problem(f"{where}.params", "expected {<agent name>: {brain_avgN: value, phase_avgN: value}}")
        return
    for agent, rules in params.items():
        for key, value in (rules or {}).items() if isinstance(rules, dict) else []:
            kind, digits = str(key)[:9], str(key)[9:]
            if kind not in ("brain_avg", "phase_avg") or not digits.isdigit() or int(digits) < 1:
                reader.problem(f"{where}.params.{agent}.{key}", "expected brain_avgN: value or phase_avgN: value (N > 0)")
                continue
            try:
                threshold = float(value)
            except (TypeError, ValueError):
                reader.problem(f"{where}.params.{agent}.{key}", f"expected a number, got {value!r}")
                continue
            if kind == "brain_avg":
                end_at[str(agent)] = (int(digits), threshold)
            else:
                stop_when.append({"behavior": str(agent), "episodes": int(digits), "mean_objective_per_step": threshold})


def simulation_section(reader: Reader, where: str, data: Any,
                stop_when: list[dict[str, Any]]) -> tuple[bool, dict[str, tuple[int, float]]]:
    """(taking turns, {agent: (N, X)} from AgentObjectiveTerminationCondition's brain_avgN); its
    phase_avgN go to ``stop_when``."""
    data = reader.keys(f"{where}.simulation", data or {}, SIMULATION_KEYS)
    name = str(data.get("name", ""))
    cls = name.rpartition(":")[2]
    turns = False
    if cls in TAKING_TURNS + VANILLA and not palaestrai_module(name, "palaestrai.simulation"):
        reader.problem(f"{where}.simulation.name", f"{name!r}: palaestrAI's controllers are in palaestrai.simulation "
                       f"(palaestrai.simulation:{cls})")
    if cls in TAKING_TURNS:
        turns = True
    elif cls not in VANILLA:
        reader.problem(f"{where}.simulation.name", f"{name!r} is not a simulation controller ml_arl runs; use "
                       f"palaestrai.simulation:{' | '.join(VANILLA + TAKING_TURNS)}")
    end_at: dict[str, tuple[int, float]] = {}
    conditions = data.get("conditions") or []
    if not isinstance(conditions, list):
        reader.problem(f"{where}.simulation.conditions", "expected a list of {name, params}")
        conditions = []
    for i, cond in enumerate(conditions):
        cwhere = f"{where}.simulation.conditions[{i}]"
        cond = reader.keys(cwhere, cond, ("name", "params"))
        cname = str(cond.get("name", "")).rpartition(":")[2]
        if cname not in CONDITIONS:
            reader.problem(cwhere, f"{cond.get('name')!r} is not supported; ml_arl runs {', '.join(CONDITIONS)}")
            continue
        if not condition_module_ok(str(cond.get("name", ""))):
            reader.problem(cwhere, f"{cond.get('name')!r}: palaestrAI's termination conditions are in "
                           f"palaestrai.experiment (palaestrai.experiment:{cname})")
            continue
        if cname == "AgentObjectiveTerminationCondition":
            objective_rules(reader, cwhere, cond.get("params") or {}, end_at, stop_when)
    return turns, end_at


def agent_section(reader: Reader, where: str, agent: dict[str, Any], end_at: Optional[tuple[int, float]],
           env: Optional[tuple[EnvironmentSpec, ...]], seed: int) -> Optional[tuple[dict[str, Any], AgentWiring]]:
    name = agent["name"]
    problems_before = len(reader.problems)
    for key in ("brain", "muscle", "objective", "sensors", "actuators"):
        if key not in agent:
            reader.problem(where, f"{key} missing")
    if len(reader.problems) > problems_before:
        return None
    brain, muscle = agent["brain"], agent["muscle"]
    brain_name = brain.get("name", "") if isinstance(brain, dict) else ""
    harl = harl_class(str(brain_name))
    objective = reader.plugin(f"{where}.objective", agent["objective"])
    filters: list[PluginSpec] = []
    raw_filters = agent.get("filters") or []
    if not isinstance(raw_filters, list):
        reader.problem(f"{where}.filters", "expected a list of {name, params}")
        raw_filters = []
    for i, item in enumerate(raw_filters):
        spec = reader.plugin(f"{where}.filters[{i}]", item)
        if spec is not None:
            filters.append(spec)
    if raw_filters and harl is not None:
        reader.problem(f"{where}.filters", f"filters run with palaestrAI's Brain/Muscle API; harl:{harl} runs on our "
                       "trainers here, whose observations are normalised by network_settings.normalize; remove them")
        return None
    sensors, actuators = agent["sensors"], agent["actuators"]
    for key, ids in (("sensors", sensors), ("actuators", actuators)):
        if not isinstance(ids, list) or not all(isinstance(s, (str, int)) for s in ids):
            reader.problem(f"{where}.{key}", "expected a list of ids <env uid>.<id>")
            return None
    settings: dict[str, Any]
    if harl is not None:
        if harl in NOT_OURS:
            reader.problem(f"{where}.brain", f"harl:{harl} is not run by ml_arl; harl brains that run: "
                           f"{', '.join('harl:' + b for b in HARL_TRAINERS)} (on our PPO and SAC)")
            return None
        if harl not in HARL_TRAINERS:
            reader.problem(f"{where}.brain", f"{brain_name!r} is not a harl brain; harl brains that run: "
                           f"{', '.join('harl:' + b for b in HARL_TRAINERS)}")
            return None
        reader.keys(f"{where}.brain", brain, ("name", "params"))
        reader.keys(f"{where}.muscle", muscle, ("name", "params"))
        mname = str(muscle.get("name", "")) if isinstance(muscle, dict) else ""
        if harl_class(mname) != HARL_MUSCLES[harl]:
            reader.problem(f"{where}.muscle", f"harl:{harl} acts with harl:{HARL_MUSCLES[harl]}, got {mname!r}")
        settings, warnings = translate(name, harl, dict(brain.get("params") or {}), dict(muscle.get("params") or {}))
        reader.warnings += [f"{reader.path}: {w}" for w in warnings]
    else:
        b = reader.plugin(f"{where}.brain", brain)
        m = reader.plugin(f"{where}.muscle", muscle)
        if b is None or m is None:
            return None
        settings = {
            "trainer_type": BRAIN_TRAINER,
            "hyperparameters": {"brain": {"name": b.name, "params": b.params}, "muscle": {"name": m.name, "params": m.params},
                                "sensors": [str(s) for s in sensors], "actuators": [str(a) for a in actuators],
                                "environments": [{"name": e.name, "uid": e.uid, "params": e.params} for e in env or ()],
                                "filters": [{"name": f.name, "params": f.params} for f in filters],
                                "seed": seed},
        }
    settings["objective"] = {"name": OBJECTIVE}
    settings.setdefault("summary_freq", 1000)
    settings["max_steps"] = 10**12  # phases end by episodes, as palaestrAI's do
    wiring = AgentWiring(name, tuple(str(s) for s in sensors), tuple(str(a) for a in actuators), objective, end_at)
    return settings, wiring


def load_section(reader: Reader, where: str, data: Any, agent: str, uid: str, index: int,
          phases: list[tuple[str, dict[str, Any], set[str]]], results_dir: str) -> Optional[dict[str, Any]]:
    """Our ``load`` entry for a palaestrAI ``load``; None when the brain carries over (the default)."""
    if data is None:
        return None
    data = reader.keys(f"{where}.load", data, LOAD_KEYS)
    if index == 0 and not all(k in data for k in LOAD_KEYS):
        if data == {"agent": agent}:  # what arsenAI writes for every agent: palaestrAI ignores it, silently
            return None
        reader.warnings.append(f"{reader.path}: {where}.load: in the first phase palaestrAI uses a load only when it names "
                               "agent, experiment_run and phase; ignored")
        return None
    full = {"agent": agent, "experiment_run": uid, "phase": index - 1}
    full.update(data)
    if full["agent"] is None:
        return None
    run, phase, source = str(full["experiment_run"]), full["phase"], str(full["agent"])
    if not isinstance(phase, int) or phase < 0:
        reader.problem(f"{where}.load.phase", f"expected a phase number, got {phase!r}")
        return None
    if run == uid:
        if phase >= index:
            reader.problem(f"{where}.load.phase", f"phase {phase} has not run before phase {index}")
            return None
        if phase == index - 1 and source == agent:
            return None  # the brain carries over from the phase before
        return {"phase": phase_name(phases[phase][0], phase), "behavior": source}
    folder = run_name(run)  # the run's folder: its uid as arl-learn names runs
    names = phase_names_of(results_dir, folder)
    if not names:
        reader.problem(f"{where}.load.experiment_run", f"no run {run!r} in {results_dir} (looked for "
                       f"{os.path.join(results_dir, folder, 'run_logs', 'phases.json')})")
        return None
    if phase >= len(names):
        reader.problem(f"{where}.load.phase", f"run {run!r} has phases 0-{len(names) - 1} ({', '.join(names)})")
        return None
    return {"run": folder, "phase": names[phase], "behavior": source}


def phase_name(name: str, index: int) -> str:
    import re

    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip("_.-")
    return clean or f"phase_{index}"


def run_name(uid: str) -> str:
    """The run id a uid gives: the uid with every run of other characters than letters, digits,
    '-', '_' and '.' made one '-' (``Two dummy agents`` -> ``Two-dummy-agents``)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "-", uid).strip("-.") or "palaestrai-run"


def palaestrai_module(name: str, package: str) -> bool:
    """``name`` (module:Class) is in ``package`` or one of its modules."""
    module = name.partition(":")[0]
    return module == package or module.startswith(package + ".")


def condition_module_ok(name: str) -> bool:
    """A termination condition named in palaestrAI's modules (palaestrai.experiment, or the deprecated
    VanillaSimControllerTerminationCondition's palaestrai.simulation)."""
    return palaestrai_module(name, "palaestrai.experiment") or palaestrai_module(name, "palaestrai.simulation")
