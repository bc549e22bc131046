#!/usr/bin/env bash
# Unity ML-Agents 1.1.0, the reference trainer the benches of bench/peers/ compare with, in a venv of its own
# (its pins: numpy 1.23, protobuf 3.20, grpcio 1.49, onnx 1.15 would break the project's .venv):
#   make peer-mlagents                           # .venv-mlagents at the repository root (this script, once)
#   bash bench/peers/install_mlagents.sh [VENV]  # the same, into VENV (default: .venv-mlagents)
# Who uses it:
#   .venv-mlagents/bin/python bench/peers/mlagents_gym.py ...           ML-Agents' trainer on a gymnasium task
#   python bench/peers/wallclock_vs_mlagents.py ...                     (its default --mlagents-python)
#   python bench/peers/unity_seeker.py --mlagents-venv .venv-mlagents   mlagents-learn on the stand-in build
#   python bench/speed/unity_bridge.py --raw-python .venv-mlagents/bin/python    mlagents-envs 1.1.0's own loop
# What goes in, in this order: Python 3.11 (PYTHON=python3.11 by default); torch 2.13.0 from pip's index (the CPU
# wheel on machines whose index serves it, as for .venv); mlagents and mlagents-envs 1.1.0 without their declared
# requirements (they declare Python <= 3.10.12, and run on 3.11); their requirements under the pins below;
# pettingzoo 1.15.0 (mlagents-envs imports it); gymnasium 1.2 with mujoco and imageio for the gymnasium tasks.
# It downloads from the package index (no cache is assumed) and ends with an import check. A venv already at VENV
# is replaced. Two things ML-Agents 1.1.0 needs under torch >= 2.9 are done by the bench scripts, not here:
# ONNX export with dynamo=False, and register_trainer_plugins() before a TrainerFactory is built in-process.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${1:-$ROOT/.venv-mlagents}
PYTHON=${PYTHON:-python3.11}

mkdir -p "$(dirname "$VENV")"
target=$(cd "$(dirname "$VENV")" && pwd -P)/$(basename "$VENV")
case "$target" in
	"$(cd "$ROOT" && pwd -P)" | "$(cd "$ROOT" && pwd -P)/.venv" | */. | */.. | / | "$HOME")
		echo "install_mlagents.sh: refusing to replace $target; give a folder of its own (default: .venv-mlagents)" >&2
		exit 2 ;;
esac
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
	echo "install_mlagents.sh: $VENV exists and is not a venv; move it away or give another folder" >&2
	exit 2
fi
"$PYTHON" -c "import sys; assert sys.version_info[:2] == (3, 11), sys.version" 2>/dev/null || {
	echo "install_mlagents.sh: $PYTHON is not Python 3.11 (set PYTHON=...); ML-Agents 1.1.0 is run on 3.11 here" >&2
	exit 2
}

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip

# The pins ML-Agents 1.1.0 is run with (kept in the venv, for a look later)
pins="$VENV/mlagents-pins.txt"
cat > "$pins" <<'PINS'
numpy==1.23.5
protobuf==3.20.3
grpcio==1.49.1
onnx==1.15.0
cattrs==1.5.0
setuptools>=77.0.3,<81
PINS

"${pip[@]}" install -q -c "$pins" "torch==2.13.0"
"${pip[@]}" install -q --no-deps --ignore-requires-python "mlagents==1.1.0" "mlagents-envs==1.1.0"
"${pip[@]}" install -q -c "$pins" --only-binary=numpy,grpcio,onnx,h5py \
	numpy protobuf grpcio onnx cattrs setuptools attrs h5py pyyaml Pillow cloudpickle \
	"filelock>=3.4.0" "six>=1.16" "tensorboard>=2.14" "huggingface-hub>=0.14" "gym>=0.21.0"
"${pip[@]}" install -q --no-deps --ignore-requires-python "pettingzoo==1.15.0"
"${pip[@]}" install -q -c "$pins" "gymnasium==1.2.*" mujoco imageio

"$VENV/bin/python" -W ignore -c "
import gymnasium, mujoco, mlagents.trainers.trainer_controller, mlagents_envs, google.protobuf
print(f'ML-Agents 1.1.0 in $VENV: mlagents-envs {mlagents_envs.__version__}, protobuf {google.protobuf.__version__}, '
      f'gymnasium {gymnasium.__version__}, mujoco {mujoco.__version__}')
"
