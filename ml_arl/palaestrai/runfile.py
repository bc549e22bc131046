"""palaestrAI experiment run files (``uid``, ``seed``, ``version``, ``schedule``, ``run_config``) as
our run configuration.

A run file is told apart from our configs by its ``schedule`` key. It is read as palaestrai 3.5.18
reads it (``palaestrai/experiment/run_schema.yaml``; ``ExperimentRun._expand_config``), then
translated:

* each phase (``{<name>: {environments, agents, simulation, phase_config}}``) inherits every
  top-level key it leaves out from the phases before it, and a key it gives replaces the inherited
  one whole, as 3.5.18's ``update_dict`` does (``phase_config: {mode: test}`` drops ``worker`` and
  ``episodes``, not as palaestrAI's docs describe it);
* each agent becomes a behavior of its name: harl's PPO and SAC on our trainers
  (ml_arl.palaestrai.harl), any other Brain/Muscle pair on ml_arl.palaestrai.agents; its palaestrAI
  objective runs in the environment adapter (ml_arl.palaestrai.env);
* a phase is one of ours with the schedule's name, ``mode``, and ``episodes x worker`` episodes
  (``episodes`` counts per worker, as palaestrAI counts it); the run's ``num_envs`` is the largest
  ``worker``; brains carry over from phase to phase, ``load`` takes one from an earlier run;
* ``seed`` is the run's seed; ``uid`` is the default run id (``--run-id`` overrides it).

Every problem is collected and reported at once, one line each, before anything starts.
"""

from __future__ import annotations

import copy
import difflib
import json
import logging
import os
from typing import Any, Optional

from ml_arl.exceptions import ConfigError
from ml_arl.import_path import ImportPathError, resolve
from ml_arl.palaestrai.definitions import PHASE_PARAMETER, AgentWiring, EnvironmentSpec, PluginSpec
from ml_arl.palaestrai.harl import HARL_MUSCLES, HARL_TRAINERS, NOT_OURS, harl_class, translate

logger = logging.getLogger(__name__)

SOURCE_PREFIX = "palaestrai:"
RUN_KEYS = ("uid", "experiment_uid", "seed", "version", "schedule", "run_config", "id")
PHASE_KEYS = ("environments", "agents", "simulation", "phase_config")
ENV_ITEM_KEYS = ("environment", "reward", "state_transformer")
NAME_PARAMS_KEYS = ("name", "uid", "params")
AGENT_KEYS = ("name", "load", "replay", "brain", "muscle", "objective", "sensors", "actuators", "filters")
LOAD_KEYS = ("agent", "experiment_run", "phase")
SIMULATION_KEYS = ("name", "conditions")
PHASE_CONFIG_KEYS = ("mode", "worker", "episodes", "evaluate_every", "store_raw_actuators")
VANILLA = ("VanillaSimulationController", "VanillaSimController", "Vanilla")
TAKING_TURNS = ("TakingTurnsSimulationController", "TakingTurns")
CONDITIONS = (
    "VanillaRunGovernorTerminationCondition", "VanillaSimControllerTerminationCondition",
    "EnvironmentTerminationCondition", "MaxEpisodesTerminationCondition", "AgentObjectiveTerminationCondition",
)
OBJECTIVE = "ml_arl.palaestrai.objective:EnvironmentObjective"
BRAIN_TRAINER = "ml_arl.palaestrai.agents:BrainTrainer"


def is_run_file(data: Any) -> bool:
    """A palaestrAI run file: a ``schedule`` and none of our sections."""
    return isinstance(data, dict) and "schedule" in data and "behaviors" not in data and "phases" not in data


def _closest(key: str, valid: tuple[str, ...]) -> str:
    near = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
    return f"; did you mean {near[0]!r}?" if near else f"; valid keys: {', '.join(valid)}"


class _Reader:
    """Collects the problems of one run file, each as one line naming where."""

    def __init__(self, path: str):
        self.path = path
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def problem(self, where: str, text: str) -> None:
        self.problems.append(f"{self.path}: {where}: {text}")

    def keys(self, where: str, data: Any, valid: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.problem(where, f"expected a mapping, got {type(data).__name__}")
            return {}
        for key in data:
            if key not in valid:
                self.problem(where, f"unknown key {key!r}{_closest(key, valid)}")
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
            self.problem(where, f"unknown key 'uid'{_closest('uid', ('name', 'params'))}")
        if check_import:
            try:
                resolve(name)
            except ImportPathError as err:
                self.problem(where, f"{name} does not import: {err}")
                return None
        return PluginSpec(name, dict(params))


def _expand(reader: _Reader, schedule: Any) -> list[tuple[str, dict[str, Any], set[str]]]:
    """palaestrai 3.5.18's cascade: every top-level phase key inherited whole from the phases before.
    Each phase comes with the keys it gives itself (the others it inherited, or lacks)."""
    if not isinstance(schedule, list) or not schedule:
        reader.problem("schedule", "expected a list of phases, each {<phase name>: {...}}")
        return []
    config: dict[str, Any] = {}
    phases: list[tuple[str, dict[str, Any], set[str]]] = []
    reported: set[str] = set()
    for i, item in enumerate(schedule):
        where = f"schedule[{i}]"
        if not isinstance(item, dict) or len(item) != 1:
            reader.problem(where, "each phase is a mapping of exactly one phase name to its settings")
            continue
        name, body = next(iter(item.items()))
        body = reader.keys(f"{where}.{name}", body if body is not None else {}, PHASE_KEYS)
        if not body:
            continue  # palaestrAI skips an empty phase
        missing = [k for k in PHASE_KEYS if k not in body and k not in config and k not in reported]
        reported.update(missing)
        if missing:
            reader.problem(f"{where}.{name}", f"{', '.join(missing)} not given and no earlier phase to inherit "
                           f"{'them' if len(missing) > 1 else 'it'} from; the first phase defines all of {', '.join(PHASE_KEYS)}")
        for key, value in body.items():
            config[key] = value
        phases.append((str(name), copy.deepcopy(config), set(body)))
    return phases


def _phase_names_of(results_dir: str, run: str) -> list[str]:
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


class Translation:
    """What a run file becomes: our config dict, plus the environment wiring for the workers."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.environments: list[tuple[EnvironmentSpec, ...]] = []  # per phase, its environments
        self.agents: list[AgentWiring] = []
        self.taking_turns = False
        self.phase_limits: list[tuple[Optional[int], int]] = []  # per phase: (episodes per worker, workers)


def read(data: dict[str, Any], path: str, results_dir: str = "results", check_environment: bool = True) -> Translation:
    """A run file's data -> Translation; ConfigError with every problem at once."""
    reader = _Reader(path)
    top = reader.keys("top level", data, RUN_KEYS)
    uid = top.get("uid", top.get("id"))
    if not isinstance(uid, str) or not uid:
        reader.problem("uid", "a run file names its run: uid: <name>")
        uid = "palaestrai-run"
    seed = top.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        reader.problem("seed", f"expected a non-negative integer, got {seed!r}")
        seed = None
    version = top.get("version")
    if version is not None and not str(version).startswith("3."):
        reader.warnings.append(f"{path}: version {version}: written for palaestrAI {version}; ml_arl reads 3.5 run files")
    run_config = reader.keys("run_config", top.get("run_config", {}) or {}, ("condition",))
    run_stop_when: list[dict[str, Any]] = []  # the run's phase_avgN: every phase ends on them
    if run_config.get("condition") is not None:
        cond = run_config["condition"]
        cname = cond.get("name", "") if isinstance(cond, dict) else ""
        if str(cname).rpartition(":")[2] == "AgentObjectiveTerminationCondition":
            _objective_rules(reader, "run_config.condition", cond.get("params") or {}, {}, run_stop_when)
        if str(cname).rpartition(":")[2] not in CONDITIONS:
            reader.problem("run_config.condition", f"{cname!r} is not supported; ml_arl runs {', '.join(CONDITIONS)}")
    phases = _expand(reader, top.get("schedule"))
    out = Translation()
    behaviors: dict[str, dict[str, Any]] = {}
    first_agents: dict[str, dict[str, Any]] = {}
    our_phases: list[dict[str, Any]] = []
    workers = 1
    env_specs: list[tuple[EnvironmentSpec, ...]] = []
    wiring: dict[str, AgentWiring] = {}
    quiet = _Reader(path)  # an inherited key was checked where it was given: its problems are said once
    for index, (pname, phase, given) in enumerate(phases):
        where = f"schedule[{index}].{pname}"
        env_spec = None
        if "environments" in phase:
            env_spec = _environment(reader if "environments" in given else quiet, where, phase["environments"])
        if env_spec is not None:
            env_specs.append(env_spec)
        taking_turns, end_at = False, {}  # type: tuple[bool, dict[str, tuple[int, float]]]
        stop_when = list(run_stop_when)
        if "simulation" in phase:
            taking_turns, end_at = _simulation(reader if "simulation" in given else quiet, where, phase["simulation"],
                                               stop_when)
        if index == 0:
            out.taking_turns = taking_turns
        elif taking_turns != out.taking_turns:
            reader.problem(f"{where}.simulation", "a phase changes the simulation controller; ml_arl keeps the first phase's")
        r = reader if "phase_config" in given else quiet
        pc = r.keys(f"{where}.phase_config", phase.get("phase_config") or {}, PHASE_CONFIG_KEYS)
        mode = str(pc.get("mode", "train")).lower()
        if mode not in ("train", "test"):
            r.problem(f"{where}.phase_config.mode", f"{pc.get('mode')!r} is not a mode; use train or test")
            mode = "train"
        worker = pc.get("worker", 1)
        if not isinstance(worker, int) or worker < 1:
            r.problem(f"{where}.phase_config.worker", f"expected a positive integer, got {worker!r}")
            worker = 1
        workers = max(workers, worker)
        episodes = pc.get("episodes")
        if episodes is None and "phase_config" in phase:
            r.problem(f"{where}.phase_config", "no episodes: the phase would never end (a later phase's phase_config "
                      "replaces the inherited one whole in palaestrAI 3.5.18); give episodes")
        elif episodes is not None and (not isinstance(episodes, int) or episodes < 1):
            r.problem(f"{where}.phase_config.episodes", f"expected a positive integer, got {episodes!r}")
            episodes = None
        if pc.get("evaluate_every") is not None:
            r.warnings.append(f"{path}: {where}.phase_config.evaluate_every: evaluation workers are not run by ml_arl yet; ignored")
        ra = reader if "agents" in given else quiet
        agents = phase.get("agents")
        if "agents" in phase and (not isinstance(agents, list) or not agents):
            ra.problem(f"{where}.agents", "expected a list of agents")
        if not isinstance(agents, list):
            agents = []
        ours: dict[str, Any] = {"name": _phase_name(pname, index), "mode": mode,
                                "environment_parameters": {PHASE_PARAMETER: index}}
        out.phase_limits.append((episodes, worker))
        if episodes is not None:
            ours["episodes"] = episodes * worker
        if stop_when:
            ours["stop_when"] = stop_when
        if mode == "test":
            ours["deterministic"] = True
        load: dict[str, Any] = {}
        seen: set[str] = set()
        for a_index, agent in enumerate(agents):
            awhere = f"{where}.agents[{a_index}]"
            agent = ra.keys(awhere, agent, AGENT_KEYS)
            name = agent.get("name")
            if not isinstance(name, str) or not name:
                ra.problem(awhere, "every agent has a name")
                continue
            awhere = f"{where}.agents[{name}]"
            if name in seen:
                ra.problem(awhere, "two agents of one phase have this name")
                continue
            seen.add(name)
            if agent.get("replay"):
                ra.problem(f"{awhere}.replay", "replay (offline data from palaestrAI's store) is not supported by ml_arl "
                           "yet; remove it")
            # a phase that gives its own agents is checked; inherited ones were, where they were given
            entry = _agent(ra if name not in first_agents else quiet, awhere, agent, end_at.get(name), env_spec, seed or 0)
            if entry is None:
                continue
            settings, agent_wiring = entry
            if name not in first_agents:
                first_agents[name] = {k: agent.get(k) for k in ("brain", "muscle", "objective", "sensors", "actuators")}
                behaviors[name] = settings
                wiring[name] = agent_wiring
            elif first_agents[name] != {k: agent.get(k) for k in ("brain", "muscle", "objective", "sensors", "actuators")}:
                ra.problem(awhere, "a phase changes this agent's brain, muscle, objective, sensors or actuators; "
                               "ml_arl keeps an agent's as its first phase sets them (palaestrAI's docs ask the same of sensors)")
            source = _load(reader, awhere, agent.get("load"), name, uid, index, phases, results_dir)
            if source is not None:
                load[name] = source
        missing = [n for n in first_agents if n not in seen]
        if missing and agents:
            ra.problem(f"{where}.agents", f"{', '.join(missing)} left out; ml_arl runs every agent in every phase")
        if load:
            ours["load"] = load
        our_phases.append(ours)
    if check_environment and env_specs:  # with the other problems: every problem of the file at once
        _check_wiring(reader, env_specs[0], list(wiring.values()), seed or 0)
    if reader.problems:
        raise ConfigError(reader.problems)
    for warning in reader.warnings:
        logger.warning("%s", warning)
    out.environments = env_specs
    out.agents = list(wiring.values())
    env_settings: dict[str, Any] = {"env_path": f"{SOURCE_PREFIX}{os.path.abspath(path)}", "num_envs": workers}
    if seed is not None:
        env_settings["seed"] = seed
    out.config = {
        "behaviors": behaviors,
        "env_settings": env_settings,
        "checkpoint_settings": {"run_id": run_name(uid)},
        "phases": our_phases,
        "results_store": {"record_steps": True},  # palaestrAI records every step (muscle_actions): so do we
    }
    return out


def run_name(uid: str) -> str:
    """The run id a uid gives: the uid with every run of other characters than letters, digits,
    '-', '_' and '.' made one '-' (``Two dummy agents`` -> ``Two-dummy-agents``)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "-", uid).strip("-.") or "palaestrai-run"


def _phase_name(name: str, index: int) -> str:
    import re

    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip("_.-")
    return clean or f"phase_{index}"


def _environment(reader: _Reader, where: str, data: Any) -> Optional[tuple[EnvironmentSpec, ...]]:
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
            specs.append(EnvironmentSpec(spec.name, env_uid, spec.params, reward, transformer))
    return tuple(specs) if len(specs) == len(data) else None


def _objective_rules(reader: _Reader, where: str, params: Any, end_at: dict[str, tuple[int, float]],
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


def _simulation(reader: _Reader, where: str, data: Any,
                stop_when: list[dict[str, Any]]) -> tuple[bool, dict[str, tuple[int, float]]]:
    """(taking turns, {agent: (N, X)} from AgentObjectiveTerminationCondition's brain_avgN); its
    phase_avgN go to ``stop_when``."""
    data = reader.keys(f"{where}.simulation", data or {}, SIMULATION_KEYS)
    name = str(data.get("name", ""))
    cls = name.rpartition(":")[2]
    turns = False
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
        if cname == "AgentObjectiveTerminationCondition":
            _objective_rules(reader, cwhere, cond.get("params") or {}, end_at, stop_when)
    return turns, end_at


def _agent(reader: _Reader, where: str, agent: dict[str, Any], end_at: Optional[tuple[int, float]],
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


def _load(reader: _Reader, where: str, data: Any, agent: str, uid: str, index: int,
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
        return {"phase": _phase_name(phases[phase][0], phase), "behavior": source}
    names = _phase_names_of(results_dir, run)
    if not names:
        reader.problem(f"{where}.load.experiment_run", f"no run {run!r} in {results_dir} (looked for "
                       f"{os.path.join(results_dir, run, 'phases.json')})")
        return None
    if phase >= len(names):
        reader.problem(f"{where}.load.phase", f"run {run!r} has phases 0-{len(names) - 1} ({', '.join(names)})")
        return None
    return {"run": run, "phase": names[phase], "behavior": source}


def _check_wiring(reader: _Reader, envs: tuple[EnvironmentSpec, ...], agents: list[AgentWiring], seed: int) -> None:
    """Start the environments once here and check every agent's sensors and actuators against them."""
    from ml_arl.palaestrai.definitions import offered_ids, wiring_problems

    sensors: list[str] = []
    actuators: list[str] = []
    for i, env in enumerate(envs):
        try:
            s, a = offered_ids(env, seed)
        except Exception as err:  # the user's environment: its failure, in one line
            reader.problem(f"environments[{i}]", f"{env.name} did not start: {type(err).__name__}: {err}")
            return
        sensors += s
        actuators += a
    for problem in wiring_problems(agents, sensors, actuators):
        reader.problem("agents", problem)


def translate_file(data: dict[str, Any], path: str, results_dir: str = "results") -> dict[str, Any]:
    """Our config dict for a run file (the CLI's entry)."""
    return read(data, path, results_dir).config
