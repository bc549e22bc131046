"""palaestrAI compatibility: run files, environments, objectives and Brain/Muscle agents.

``arl-learn RUN.yml`` runs a palaestrAI 3.5.18 experiment run file (ml_arl.palaestrai.runfile);
its environment runs in our workers behind a BaseEnv (ml_arl.palaestrai.env), one behavior per
agent with its own sensors and actuators; harl's PPO and SAC run on our trainers
(ml_arl.palaestrai.harl); any other Brain/Muscle pair runs as palaestrAI's API asks
(ml_arl.palaestrai.agents). palaestrai itself is imported only where its classes are needed.
See docs/palaestrai.md.
"""
