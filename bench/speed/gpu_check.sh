#!/usr/bin/env bash
# One-shot GPU check on the device machine (H100/H200, no network), run from the repo root as
#   bash bench/speed/gpu_check.sh          (with .whl carried: the wheels of what the image lacks)
# Stages, each under its own timeout, every one run whatever the one before returned:
#   a. the GPU, torch, the carried packages, Hopper-v5 (MUJOCO_GL=egl, else MUJOCO_GL=disable)
#   c. bench/speed/sac_step.py (ms per SAC gradient step, Hopper's networks) on the CPU and on CUDA
#   p. (background, from here) PPO on Hopper-v5, ML-Agents' walker config, seeds 1-5 x 500k steps on the CPU
#   b. the CUDA tests: test_sac.py -k cuda
#   d. SAC on gymnasium Hopper-v5, seeds 1-3 in parallel on CUDA, SIGINT at the stage's end
#   e. bench/speed/gpu_summary.py: the per-seed summaries and the median over seeds
# Everything lands in $OUT as it is written (a killed run still brings it back), 8 files:
#   stages.log (this script's own output), cuda_tests.log, sac_step.log, ppo_hopper.log, seed1.log,
#   seed2.log, seed3.log, hopper_sac.md
# Shorter: GPU_CHECK_TOTAL_S=400 (d gets what is left), GPU_CHECK_D_MAX_S; GPU_CHECK_DEVICE=cpu|cuda for d.
# Local dry run on a CPU machine (CUDA stages skip or say CUDA is unavailable, SAC runs on the CPU):
#   GPU_CHECK_QUICK=1 OUT=/tmp/gpuout bash bench/speed/gpu_check.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
PIP_RC=$?
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MUJOCO_GL=egl

# ---- budget (seconds of wall clock; the whole script ends inside about TOTAL_S + 10)
TOTAL_S=${GPU_CHECK_TOTAL_S:-520}  # the whole check, from the script's start
A_S=40                 # a. nvidia-smi, torch, imports, Hopper-v5
B1_S=55                # b. pytest test_sac.py -k cuda
C_S=25                 # c. sac_step.py, once per device (2 x C_S), before anything else loads the CPUs
D_MAX_S=${GPU_CHECK_D_MAX_S:-300}  # d. the three seeds' training: at most this, else what is left of TOTAL_S
PPO_S=${GPU_CHECK_PPO_S:-400}      # p. PPO Hopper, 5 seeds at once on the CPU cores, from the end of c
PPO_STEPS=500000
PPO_SEEDS="1 2 3 4 5"
D_GRACE_S=25           # d. after SIGINT: time to save the checkpoint before SIGKILL
E_S=20                 # e. the summary
MAX_STEPS=100000       # d. Hopper-sac.yaml's max_steps 1000000 and summary_freq 50000, replaced
SUMMARY_FREQ=5000
BUFFER_INIT_STEPS=""   # d. empty: Hopper-sac.yaml's own (10000)
SAC_STEP_ARGS="--repeats 3"
SEEDS="1 2 3"
if [ "${GPU_CHECK_QUICK:-0}" = 1 ]; then  # local dry run: every stage, tiny
  TOTAL_S=300 A_S=20 B1_S=20 C_S=20 D_MAX_S=60 D_GRACE_S=20 E_S=20 PPO_S=90 PPO_STEPS=4000 PPO_SEEDS="1 2"
  MAX_STEPS=3000 SUMMARY_FREQ=1000 BUFFER_INIT_STEPS=1000 SAC_STEP_ARGS="--repeats 1 --steps 20"
fi

OUT=${OUT:-/tmp/gpuout}
mkdir -p "$OUT"
RES=/tmp/res
RC_LINES=""

left() {  # seconds left before a deadline (SECONDS), at least 1
  local n=$(( $1 - SECONDS ))
  [ "$n" -lt 1 ] && n=1
  echo "$n"
}

record() {  # record NAME RC START
  local line
  line=$(printf '%-28s rc=%-4s %4ss' "$1" "$2" "$(( SECONDS - $3 ))")
  RC_LINES+="$line"$'\n'
  echo "== $line (at ${SECONDS}s)"
}

main() {
  echo "== gpu_check.sh $(date -u +%FT%TZ) in $PWD; quick=${GPU_CHECK_QUICK:-0}; wheels installed rc=$PIP_RC"
  echo "== budget: total ${TOTAL_S}s; a ${A_S}; c 2x${C_S}; p ${PPO_S} (background); b ${B1_S}; d <=${D_MAX_S}+${D_GRACE_S}; e ${E_S}; max_steps ${MAX_STEPS}, summary_freq ${SUMMARY_FREQ}"

  # ---- a. the machine, torch, the carried packages, Hopper-v5
  local t0=$SECONDS end=$(( SECONDS + A_S )) rc
  echo "== a. machine"
  timeout 10 nvidia-smi -L; echo "nvidia-smi rc=$?"
  timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  echo "nproc $(nproc); $(free -g | awk '/Mem:/ {print $2 " GiB memory"}')"
  timeout "$(left $end)" python3 - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
import torch
ok = torch.cuda.is_available()
print("torch", torch.__version__, "cuda available", ok, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(0) if ok else "none")
for name in ("numpy", "google.protobuf", "grpc", "tensorboard", "pydantic", "pydantic_core", "yaml", "onnx",
             "cloudpickle", "mlagents_envs", "gymnasium", "mujoco", "glfw", "OpenGL", "PIL", "pytest"):
    try:
        m = importlib.import_module(name)
        print(f"  {name} {getattr(m, '__version__', '?')} {getattr(m, '__file__', '')}")
    except Exception as e:  # noqa: BLE001
        print(f"  {name} FAILED: {type(e).__name__}: {e}")
EOF
  rc=$?; record "a. torch+packages" $rc $t0
  local hopper='import ml_arl.cli.learn, mujoco, gymnasium
e = gymnasium.make("Hopper-v5"); o, _ = e.reset(seed=0); r = e.step(e.action_space.sample())[1]
print("Hopper-v5 ok: obs", o.shape, "reward", round(float(r), 3), "mujoco", mujoco.__version__, "MUJOCO_GL", __import__("os").environ.get("MUJOCO_GL"))'
  timeout "$(left $end)" python3 -c "$hopper"; rc=$?
  if [ $rc -ne 0 ]; then
    echo "== Hopper-v5 failed with MUJOCO_GL=egl (rc=$rc): trying MUJOCO_GL=disable"
    export MUJOCO_GL=disable
    timeout "$(left $end)" python3 -c "$hopper"; rc=$?
  fi
  record "a. ml_arl.cli.learn+Hopper-v5" $rc $t0

  # ---- c. sac_step.py: ms per SAC gradient step on the CPU and on CUDA
  # (buffer_init_steps 5000: with Hopper-sac.yaml's 10000 the 5000 experiences sac_step.py fills take no step)
  echo "== c. sac_step.py -> sac_step.log"
  python3 bench/speed/gpu_summary.py make-config config/mujoco/Hopper-sac.yaml /tmp/hopper-sac-step.yaml --buffer-init-steps 5000 > "$OUT/sac_step.log" 2>&1
  for dev in cpu cuda; do
    t0=$SECONDS
    { echo "== sac_step.py on $dev"
      # shellcheck disable=SC2086
      timeout -k 5 "$C_S" python3 bench/speed/gpu_summary.py sac-step --device $dev --config /tmp/hopper-sac-step.yaml \
        --behavior Hopper --obs 11 --actions 3 $SAC_STEP_ARGS 2>&1
      rc=$?; printf '\nrc=%s\n' $rc; } >> "$OUT/sac_step.log"
    record "c. sac_step $dev" $rc $t0
  done
  grep -E "^==|SAC trainer|ms per|unavailable|Error" "$OUT/sac_step.log"

  # ---- p. PPO on Hopper-v5 with ML-Agents' walker config (issue 33 item 1), 5 seeds x 500k steps on the
  # CPU cores, in the background from here on (after the timings of c), while b and d run
  t0=$SECONDS
  echo "== p. PPO Hopper-v5, mlagents-walker config, seeds $PPO_SEEDS, $PPO_STEPS steps, in the background -> ppo_hopper.log"
  # shellcheck disable=SC2086
  timeout -s INT -k 20 "$PPO_S" python3 bench/learning/mujoco.py --configs config/mujoco/mlagents-walker --tasks Hopper \
    --seeds $PPO_SEEDS --steps "$PPO_STEPS" --jobs 5 --results-dir /tmp/ppo -- --torch-device cpu > "$OUT/ppo_hopper.log" 2>&1 &
  local ppo_pid=$! ppo_t0=$t0

  # ---- b. CUDA tests
  t0=$SECONDS
  echo "== b. CUDA tests -> cuda_tests.log"
  { echo "== pytest tests/trainers/test_sac.py -k cuda"
    timeout -k 5 "$B1_S" python3 -m pytest -q -x -p no:cacheprovider -rs tests/trainers/test_sac.py -k cuda 2>&1
    rc=$?; printf '\nrc=%s\n' $rc; } > "$OUT/cuda_tests.log"
  record "b. test_sac -k cuda" $rc $t0
  grep -E "passed|failed|skipped|error|SKIPPED|FAILED|^E " "$OUT/cuda_tests.log" | tail -15

  # ---- d. SAC on Hopper-v5, three seeds in parallel
  t0=$SECONDS
  local dev=${GPU_CHECK_DEVICE:-}
  if [ -z "$dev" ]; then
    dev=$(timeout 30 python3 -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")' 2>/dev/null || echo cpu)
  fi
  local d_s=$(( TOTAL_S - SECONDS - D_GRACE_S - E_S ))
  [ "$d_s" -gt "$D_MAX_S" ] && d_s=$D_MAX_S
  [ "$d_s" -lt 30 ] && d_s=30
  echo "== d. SAC Hopper-v5, seeds $SEEDS in parallel on $dev, SIGINT after ${d_s}s -> seedN.log"
  local cfg=/tmp/hopper-sac-gpu.yaml
  python3 bench/speed/gpu_summary.py make-config config/mujoco/Hopper-sac.yaml $cfg --max-steps $MAX_STEPS \
    --summary-freq $SUMMARY_FREQ ${BUFFER_INIT_STEPS:+--buffer-init-steps $BUFFER_INIT_STEPS}
  rm -rf "$RES"
  local pids=() s
  for s in $SEEDS; do
    timeout -s INT -k "$D_GRACE_S" "$d_s" python3 -c 'from ml_arl.cli.learn import run; run()' $cfg \
      --run-id hopper-sac-s$s --seed $s --results-dir "$RES" --force --torch-device "$dev" > "$OUT/seed$s.log" 2>&1 &
    pids+=($!)
  done
  local i=0
  for s in $SEEDS; do
    wait "${pids[$i]}"; rc=$?; i=$(( i + 1 ))
    record "d. seed $s ($dev)" $rc $t0
    grep -E "Step: |Training finished|Saved checkpoint|Error|Traceback" "$OUT/seed$s.log" | tail -3
  done

  # ---- p. wait for PPO (its own deadline: PPO_S from its start)
  wait "$ppo_pid"; rc=$?
  record "p. PPO Hopper 5 seeds" $rc $ppo_t0
  tail -20 "$OUT/ppo_hopper.log"
  # each run's score from its store, also when the budget cut the runs (steps: the episodes' lengths summed)
  timeout 30 python3 - <<'PY' 2>&1 | tee -a "$OUT/ppo_hopper.log"
import sqlite3
from pathlib import Path
for run in sorted(Path("/tmp/ppo").glob("Hopper-ppo-s*")):
    db = run / "results.sqlite"
    if not db.is_file():
        print(run.name, "no results.sqlite")
        continue
    rows = sqlite3.connect(str(db)).execute("SELECT env_reward, length FROM episodes ORDER BY rowid").fetchall()
    returns = [r for r, _ in rows]
    tail = returns[-max(1, len(returns) // 10):]
    score = sum(tail) / len(tail) if tail else float("nan")
    print(f"PPO_RUN {run.name} episodes={len(rows)} steps~{sum(n for _, n in rows)} score_last10%={score:.1f}")
PY

  # ---- e. the summary
  t0=$SECONDS
  # shellcheck disable=SC2046
  timeout -k 5 "$E_S" python3 bench/speed/gpu_summary.py "$RES" $(for s in $SEEDS; do echo hopper-sac-s$s; done) > "$OUT/hopper_sac.md" 2>&1
  record "e. summary" $? $t0
  sed -n '/^## Over the runs/,$p' "$OUT/hopper_sac.md"

  echo "== stages (rc 124 = its timeout; for seeds, 124 after SIGINT = stopped at the budget):"
  printf '%s' "$RC_LINES"
  echo "== done in ${SECONDS}s; files: $(cd "$OUT" && ls | tr '\n' ' ')"
}

main 2>&1 | tee -a "$OUT/stages.log"
exit "${PIPESTATUS[0]}"
