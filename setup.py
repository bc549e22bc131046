from setuptools import find_packages, setup

setup(
    name="ml_arl",
    version="0.1.0",
    description="Reinforcement learning for Unity builds, Python environments and adversarial scenarios",
    packages=find_packages(include=["ml_arl", "ml_arl.*"]),
    python_requires=">=3.10,<3.13",
    install_requires=[
        "mlagents-envs==0.28.0",
        "protobuf>=3.20,<3.21",
        "torch>=2.4",  # fused Adam on CPU; install torch==2.13.0 first (see Makefile); this range then installs nothing more
        "numpy>=1.23",
        "cloudpickle>=2.0",
        "pyyaml>=6.0",
        "tensorboard>=2.14",
        "gymnasium>=1.0",
        "pydantic>=2.5,<3",
        "tqdm>=4.60",
        "onnx>=1.15,<1.18",  # 1.18 needs protobuf >= 4, which mlagents-envs' generated modules cannot import
        "matplotlib>=3.7",  # arl-report draws learning curves into a PNG
    ],
    extras_require={
        "dev": ["onnxruntime>=1.17", "hypothesis>=6.100", "pandapower>=2.13", "pytest>=7", "pytest-timeout>=2", "pytest-xdist>=3.5,<4", "ruff>=0.5", "mypy>=1.8", "types-PyYAML", "types-tqdm"],
        # bench/: stable-baselines3 as a peer; MuJoCo (gymnasium[mujoco] = the mujoco wheel) for bench/mujoco.py
        "bench": ["stable-baselines3>=2.3", "gymnasium[mujoco]>=1.0"],
        # --env pettingzoo:<module>; mpe2 holds the MPE games the tests and bench/pettingzoo_pipeline.py use
        "pettingzoo": ["pettingzoo>=1.25,<2", "mpe2>=1.0"],
        # plain ray, not ray[default]: its extras pull protobuf >= 3.21, which mlagents-envs cannot import
        "ray": ["ray>=2.60,<3"],
    },
    entry_points={"console_scripts": ["arl-learn=ml_arl.cli:run", "arl-report=ml_arl.report:main"]},
)
