#!/usr/bin/env bash
# palaestrAI 3.5.18 with palaestrai-agents (harl) 3.6.2 and palaestrai-environments 3.5.5, the peer that
# bench/peers/palaestrai/tictactoe_harl.yml is run on, in a venv of its own (harl wants numpy < 2; .venv has numpy 2):
#   bash bench/peers/install_palaestrai_harl.sh [VENV]  # into VENV (default: .venv-palaestrai-harl at the repository root)
# Who uses it:
#   .venv-palaestrai-harl/bin/palaestrai -c runtime.conf.yaml experiment-start bench/peers/palaestrai/tictactoe_harl.yml
#   python bench/peers/palaestrai_store_moves.py STORE.db     the per-move rewards of such a run's store
# What goes in, in this order: Python 3.11 (PYTHON=python3.11 by default); torch 2.13.0 from pip's index (the CPU
# wheel on machines whose index serves it, as for .venv); then numpy < 2, palaestrai 3.5.18, palaestrai-agents 3.6.2
# and palaestrai-environments 3.5.5 under the pins below (torch stays 2.13.0: pip may not resolve another one).
# It downloads from the package index (no cache is assumed), patches harl (below) and ends with an import check.
# A venv already at VENV is replaced.
# The patch: harl 3.6.2's PPO actor builds its discrete heads as
# `nn.Linear(fc_dims[0], n) for n in range(act_dim)`, where act_dim is the list of action counts (one per discrete
# actuator), so any discrete action space crashes it; it must be `for n in act_dim`. The installed harl/ppo/network.py
# is patched in place, and the script fails if that text is not found.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${1:-$ROOT/.venv-palaestrai-harl}
PYTHON=${PYTHON:-python3.11}

mkdir -p "$(dirname "$VENV")"
target=$(cd "$(dirname "$VENV")" && pwd -P)/$(basename "$VENV")
case "$target" in
	"$(cd "$ROOT" && pwd -P)" | "$(cd "$ROOT" && pwd -P)/.venv" | */. | */.. | / | "$HOME")
		echo "install_palaestrai_harl.sh: refusing to replace $target; give a folder of its own (default: .venv-palaestrai-harl)" >&2
		exit 2 ;;
esac
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
	echo "install_palaestrai_harl.sh: $VENV exists and is not a venv; move it away or give another folder" >&2
	exit 2
fi
"$PYTHON" -c "import sys; assert sys.version_info[:2] == (3, 11), sys.version" 2>/dev/null || {
	echo "install_palaestrai_harl.sh: $PYTHON is not Python 3.11 (set PYTHON=...); palaestrAI 3.5.18 is run on 3.11 here" >&2
	exit 2
}

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip)
"${pip[@]}" install -q --upgrade pip

# The pins palaestrAI + harl are run with (kept in the venv, for a look later)
pins="$VENV/palaestrai-harl-pins.txt"
cat > "$pins" <<'PINS'
torch==2.13.0
numpy<2
palaestrai==3.5.18
palaestrai-agents==3.6.2
palaestrai-environments==3.5.5
PINS

"${pip[@]}" install -q -c "$pins" "torch==2.13.0"
"${pip[@]}" install -q -c "$pins" --only-binary=numpy "numpy<2" "palaestrai==3.5.18" "palaestrai-agents==3.6.2" \
	"palaestrai-environments==3.5.5"

"$VENV/bin/python" - <<'PATCH'
import pathlib, harl.ppo
network = pathlib.Path(harl.ppo.__file__).with_name("network.py")
text = network.read_text()
old, new = "nn.Linear(fc_dims[0], n) for n in range(act_dim)", "nn.Linear(fc_dims[0], n) for n in act_dim"
if text.count(old) != 1:
    raise SystemExit(f"install_palaestrai_harl.sh: {old!r} found {text.count(old)} times in {network} (expected once)")
network.write_text(text.replace(old, new))
print(f"patched {network}: discrete heads 'for n in act_dim'")
PATCH

"$VENV/bin/python" -W ignore -c "
import importlib.metadata as md, numpy, torch
import palaestrai, harl, harl.ppo.network, palaestrai_environments.tictactoe
assert torch.__version__.split('+')[0] == '2.13.0', torch.__version__
assert int(numpy.__version__.split('.')[0]) < 2, numpy.__version__
versions = ', '.join(f'{p} {md.version(p)}' for p in ('palaestrai', 'palaestrai-agents', 'palaestrai-environments'))
print(f'palaestrAI in $VENV: {versions}, torch {torch.__version__}, numpy {numpy.__version__}')
"
