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
import logging
import os
from typing import Any, Optional

from ml_arl.core.exceptions import ConfigError
from ml_arl.palaestrai.definitions import PHASE_PARAMETER, AgentWiring, EnvironmentSpec
from ml_arl.palaestrai.run_sections import (
    CONDITIONS,
    Reader,
    agent_section,
    condition_module_ok,
    environment_section,
    load_section,
    objective_rules,
    phase_name,
    run_name,
    simulation_section,
)

logger = logging.getLogger(__name__)

SOURCE_PREFIX = "palaestrai:"
RUN_KEYS = ("uid", "experiment_uid", "seed", "version", "schedule", "run_config", "id")
PHASE_KEYS = ("environments", "agents", "simulation", "phase_config")
AGENT_KEYS = ("name", "load", "replay", "brain", "muscle", "objective", "sensors", "actuators", "filters")
PHASE_CONFIG_KEYS = ("mode", "worker", "episodes", "evaluate_every", "store_raw_actuators")


def is_run_file(data: Any) -> bool:
    """A palaestrAI run file: a ``schedule`` (or a ``uid`` with a ``run_config``) and none of our sections."""
    return (isinstance(data, dict) and ("schedule" in data or ("uid" in data and "run_config" in data))
            and "behaviors" not in data and "phases" not in data)


def _expand(reader: Reader, schedule: Any) -> list[tuple[str, dict[str, Any], set[str]]]:
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


class Translation:
    """What a run file becomes: our config dict, plus the environment wiring for the workers."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.environments: list[tuple[EnvironmentSpec, ...]] = []  # per phase, its environments
        self.agents: list[AgentWiring] = []
        self.taking_turns = False
        self.phase_limits: list[tuple[Optional[int], int]] = []  # per phase: (episodes per worker, workers)
        self.phase_agents: list[Optional[list[str]]] = []  # per phase: the agents it runs (None: every agent)


def read(data: dict[str, Any], path: str, results_dir: str = "results", check_environment: bool = True,
         log_warnings: bool = True, import_plugins: bool = True) -> Translation:
    """A run file's data -> Translation; ConfigError with every problem at once. ``import_plugins``
    False: the classes it names (environments, objectives, brains, muscles...) are checked where
    they are built, and only their modules are found here (see run_sections.Reader)."""
    try:
        import palaestrai  # noqa: F401  (its classes are the run file's: environments, objectives, agents)
    except ImportError as err:
        raise ConfigError([f"{path}: a palaestrAI run file needs palaestrai installed ({err}); "
                           "pip install -e '.[palaestrai]' (make install does)"]) from None
    reader = Reader(path, import_plugins)
    top = reader.keys("top level", data, RUN_KEYS)
    uid = top.get("uid", top.get("id"))
    if "uid" not in top and "id" in top:
        reader.warnings.append(f"{path}: id: palaestrAI 3.5.18's schema wants uid (id is refused there); read as the uid")
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
            objective_rules(reader, "run_config.condition", cond.get("params") or {}, {}, run_stop_when)
        if str(cname).rpartition(":")[2] not in CONDITIONS:
            reader.problem("run_config.condition", f"{cname!r} is not supported; ml_arl runs {', '.join(CONDITIONS)}")
        elif not condition_module_ok(str(cname)):
            reader.problem("run_config.condition", f"{cname!r}: palaestrAI's termination conditions are in "
                           "palaestrai.experiment")
    if "schedule" not in top:
        reader.problem("schedule", "missing: a run file lists its phases under schedule: [{<phase name>: {...}}, ...]")
    phases = _expand(reader, top.get("schedule")) if "schedule" in top else []
    out = Translation()
    behaviors: dict[str, dict[str, Any]] = {}
    first_agents: dict[str, dict[str, Any]] = {}
    our_phases: list[dict[str, Any]] = []
    phase_agent_names: list[list[str]] = []  # per phase, the agents it gives (or inherits)
    workers = 1
    env_specs: list[tuple[EnvironmentSpec, ...]] = []
    wiring: dict[str, AgentWiring] = {}
    quiet = Reader(path, import_plugins)  # an inherited key was checked where it was given: its problems are said once
    for index, (pname, phase, given) in enumerate(phases):
        where = f"schedule[{index}].{pname}"
        env_spec = None
        if "environments" in phase:
            env_spec = environment_section(reader if "environments" in given else quiet, where, phase["environments"])
        if env_spec is not None:
            env_specs.append(env_spec)
        taking_turns, end_at = False, {}  # type: tuple[bool, dict[str, tuple[int, float]]]
        stop_when = list(run_stop_when)
        if "simulation" in phase:
            taking_turns, end_at = simulation_section(reader if "simulation" in given else quiet, where, phase["simulation"],
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
        ours: dict[str, Any] = {"name": phase_name(pname, index), "mode": mode,
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
            entry = agent_section(ra if name not in first_agents else quiet, awhere, agent, end_at.get(name), env_spec, seed or 0)
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
            source = load_section(reader, awhere, agent.get("load"), name, uid, index, phases, results_dir)
            if source is not None:
                load[name] = source
        phase_agent_names.append(list(seen))
        if load:
            ours["load"] = load
        our_phases.append(ours)
    everyone = list(wiring)
    for ours, names in zip(our_phases, phase_agent_names):  # a phase may leave agents out: they sit it out
        active = None if set(names) == set(everyone) else [n for n in everyone if n in names]
        out.phase_agents.append(active)
        if active is not None:
            ours["act"] = active
    if check_environment and env_specs:  # with the other problems: every problem of the file at once
        _check_wiring(reader, env_specs[0], list(wiring.values()), seed or 0)
    if reader.problems:
        reader.import_deferred()  # a file that is wrong already: its classes too, every problem at once
        raise ConfigError(reader.problems)
    for warning in reader.warnings if log_warnings else []:
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


def _check_wiring(reader: Reader, envs: tuple[EnvironmentSpec, ...], agents: list[AgentWiring], seed: int) -> None:
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


def translate_file(data: dict[str, Any], path: str, results_dir: str = "results",
                   num_envs: Optional[int] = None, check_environment: bool = False,
                   import_plugins: bool = False) -> dict[str, Any]:
    """Our config dict for a run file (the CLI's entry); ``num_envs``: a --num-envs given with it.
    ``check_environment`` (``--check-wiring``): start the environments here and check the wiring
    against them; otherwise each worker checks it as its environment first starts (one line).
    ``import_plugins`` (--check): import every class the file names here; otherwise each is
    checked where it is built (see read)."""
    config = read(data, path, results_dir, check_environment=check_environment,
                  import_plugins=import_plugins or check_environment).config
    workers = config["env_settings"]["num_envs"]
    if num_envs is not None and isinstance(num_envs, int) and num_envs < workers:
        raise ConfigError([f"{path}: --num-envs {num_envs} is fewer than the {workers} workers a phase of the run file "
                           "asks for (phase_config.worker); each runs its own episodes, so give at least that many"])
    return config
