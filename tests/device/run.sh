#!/usr/bin/env bash
# The GPU path on a real GPU (issue 20): one command on the device machine, under 8 minutes on one H200.
#
#   here, first:      make device-check      (builds build/device/wheels, checks its size, installs it offline)
#   on the device:    bash tests/device/run.sh     with carry ["build/device/wheels"], timeout_s 480
#
# Steps, each under a hard timeout inside one overall budget (SYMPHONY_DEVICE_BUDGET_S, 420 s; about 4 minutes
# expected on one H200):
#   setup    venv (--system-site-packages: the device's PyTorch and pynvml) + pip install --no-index from the bundle
#   nvsmi    nvidia-smi -q -x and --query-gpu through the collection's parsers; raw outputs kept as fixtures
#   burn_in  the burn_in role's gpu and power tiers (ansible-playbook, connection: local, tests/device/device.twin.yml),
#            built-in PyTorch load where gpu-burn/DCGM are absent, NVML at 10 Hz; gpu_tunings in check mode
#   matmul   8192^3 bf16 (and fp8) products timed with CUDA events
#   smoke    the cluster_validation smoke model on one GPU in bf16 and fp8; MFU by the collection's calculator
#   summary  validation_gpu.json (tests/device/validation_gpu.schema.json), power.png, the table printed last
# Everything is written under $OUT (default build/device/out); at most 8 files come back from the device, so the
# work directory travels as evidence.tar.gz.  Copy $OUT/validation_gpu.json to build/bench/validation_gpu.json and
# commit the nvidia-smi-*.txt fixtures under tests/fixtures/.
#
# The card is never changed: no clocks, power limit, persistence or compute mode, MIG, ECC or reset.  Everything
# this run starts finds a read-only nvidia-smi first on PATH, which refuses any option but queries.
#
# Elsewhere (tests/device/test_run_fake_gpu.py): SYMPHONY_DEVICE_PYTHON=<python with the requirements> skips the
# venv; a fake nvidia-smi on PATH is read like a real one, and what needs NVML or CUDA says not_run and why.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/device
OUT=${OUT:-$ROOT/build/device/out}
WORK=${SYMPHONY_DEVICE_WORK:-$(mktemp -d /tmp/symphony-device.XXXXXX)}
WHEELS=${SYMPHONY_DEVICE_WHEELS:-$ROOT/build/device/wheels}
BUDGET_S=${SYMPHONY_DEVICE_BUDGET_S:-420}
# the SKU's bom.gpus.tdp_w, used only where the card reports no default power limit
SKU_TDP_W=700
T0=$(date +%s)
mkdir -p "$OUT" "$WORK/steps" "$WORK/bin" "$WORK/evidence"

# step NAME LIMIT_S CMD...: CMD under a hard timeout (clipped to what is left of the budget), output in
# $WORK/steps/NAME.log, {rc, limit_s, wall_s} in $WORK/steps/NAME.json; a step with no time left is skipped.
step() {
  local name=$1 limit=$2 left start rc
  shift 2
  left=$((BUDGET_S - ($(date +%s) - T0)))
  if ((left < 20)); then
    printf '{"skipped": "the run'"'"'s %ss budget was spent before it", "rc": null}\n' "$BUDGET_S" >"$WORK/steps/$name.json"
    echo "== $name: skipped, budget spent"
    return 1
  fi
  ((limit > left - 10)) && limit=$((left - 10))
  echo "== $name (at most ${limit}s, $(($(date +%s) - T0))s into the run)"
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$WORK/steps/$name.log" 2>&1
  rc=$?
  printf '{"rc": %d, "limit_s": %d, "wall_s": %d}\n' "$rc" "$limit" "$(($(date +%s) - start))" >"$WORK/steps/$name.json"
  tail -n 4 "$WORK/steps/$name.log" | cut -c1-220 | sed 's/^/   /'
  echo "   rc=$rc"
  return "$rc"
}

# A read-only nvidia-smi in front of the real one: queries pass, anything else is refused (exit 9) and logged.
guard_nvidia_smi() {
  local real
  real=$(command -v nvidia-smi) || { echo "no nvidia-smi on PATH: nothing to guard"; return 0; }
  cat >"$WORK/bin/nvidia-smi" <<EOF
#!/usr/bin/env bash
# Read-only nvidia-smi of the device check (tests/device/run.sh): only these query options reach $real.
for arg in "\$@"; do
  case "\$arg" in
    -q|--query|-x|--xml-format|-L|--list-gpus|--query-gpu=*|--format=*|-i|--id=*|-d|--display=*|-h|--help) ;;
    [0-9]*|[A-Z]*) ;;
    *) echo "device check: refused nvidia-smi \$* (read-only run)" | tee -a "$WORK/nvidia-smi-refused.log" >&2
       exit 9 ;;
  esac
done
exec "$real" "\$@"
EOF
  chmod +x "$WORK/bin/nvidia-smi"
  export SYMPHONY_DEVICE_NVIDIA_SMI=$real
  echo "nvidia-smi guarded: $real behind $WORK/bin/nvidia-smi"
}

setup() {
  if [ -n "${SYMPHONY_DEVICE_PYTHON:-}" ]; then
    PY=$SYMPHONY_DEVICE_PYTHON
    echo "using $PY as it is (SYMPHONY_DEVICE_PYTHON): no venv, no install"
    return 0
  fi
  local base site pip
  base=$(command -v python3) || { echo "no python3"; return 1; }
  PY=$WORK/venv/bin/python
  if timeout 120 "$base" -m venv --system-site-packages "$WORK/venv"; then
    pip=("$PY" -m pip)
  else
    # no ensurepip for the base interpreter: a venv without pip, filled by python3's own pip (pip >= 22.3)
    echo "venv with pip failed: a venv without pip, installed by $base -m pip --python"
    rm -rf "$WORK/venv"
    timeout 60 "$base" -m venv --without-pip --system-site-packages "$WORK/venv" || return 1
    pip=("$base" -m pip --python "$PY")
  fi
  # The device's python3 is itself a venv (/opt/torch/.venv): --system-site-packages reaches the interpreter it
  # was made from, not that venv's PyTorch and pynvml.  Its site-packages come after the new venv's own.
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$base" -c 'import site, sys; sys.prefix != sys.base_prefix and print("\n".join(site.getsitepackages()))' \
    >"$site/symphony-device-parent.pth"
  # from the bundle alone: no index, no find-links or constraints of a pip configuration
  timeout 240 env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT \
    PIP_CONFIG_FILE=/dev/null "${pip[@]}" install -q --no-index --no-cache-dir --disable-pip-version-check --find-links "$WHEELS" \
    -r "$HERE/requirements.txt" || return 1
  "$PY" -c 'import sys, ansible.release, sushy, jsonschema
print("installed: Python %d.%d, ansible-core %s, sushy, jsonschema" % (sys.version_info[:2] + (ansible.release.__version__,)))'
}

main() {
  echo "device check: root $ROOT, out $OUT, work $WORK, budget ${BUDGET_S}s"
  guard_nvidia_smi
  export PATH=$WORK/bin:$PATH
  mkdir -p "$WORK/collections/ansible_collections/symphony"
  ln -sfn "$ROOT" "$WORK/collections/ansible_collections/symphony/cluster"
  export ANSIBLE_COLLECTIONS_PATH=$WORK/collections ANSIBLE_CONFIG=$ROOT/ansible.cfg ANSIBLE_NOCOLOR=1
  export PYTHONPATH=$WORK/collections:$HERE SYMPHONY_LEDGER=$WORK/ledger.sqlite PYTHONUNBUFFERED=1
  # ansible-core refuses a locale that is not UTF-8; a bare machine may have none set
  export PYTHONUTF8=1 LANG=${LANG:-C.UTF-8}
  PY=""
  # setup runs in this shell (it sets PY); its venv and pip commands carry their own limits
  echo "== setup"
  setup >"$WORK/steps/setup.log" 2>&1
  local rc=$?
  printf '{"rc": %d, "limit_s": null, "wall_s": %d}\n' "$rc" "$(($(date +%s) - T0))" >"$WORK/steps/setup.json"
  tail -n 3 "$WORK/steps/setup.log" | sed 's/^/   /'
  if [ "$rc" -ne 0 ]; then
    echo "   setup failed (rc=$rc): the steps that need the collection are not run"
    PY=""
  fi
  local bindir smoke=(--layers 16 --dim 2048 --heads 16 --seq 2048 --vocab 32768 --batch 8 --steps 20 --warmup 5
                      --gemm-size 8192 --gemm-repeats 10)
  if [ -n "$PY" ]; then
    bindir=$(dirname "$PY")
    step nvsmi 60 "$PY" "$HERE/device_check.py" nvsmi "$WORK" "$OUT" "$SKU_TDP_W"
    [ -f "$WORK/vars.json" ] && step burn_in 300 "$bindir/ansible-playbook" -i "$HERE/device.twin.yml" \
      "$HERE/burn_in.yml" -e "@$WORK/vars.json" -e "ansible_python_interpreter=$PY"
    step matmul 90 "$PY" "$HERE/gpu_bench.py" "$WORK/matmul.json"
    for precision in bf16 fp8; do
      step "smoke_$precision" 120 "$PY" "$ROOT/roles/cluster_validation/files/smoke_train.py" --device cuda \
        --dtype "$precision" "${smoke[@]}"
      [ -f "$WORK/steps/smoke_$precision.log" ] && cp "$WORK/steps/smoke_$precision.log" "$WORK/smoke-$precision.log"
    done
  fi
  local summary_py=${PY:-python3}
  step summary 60 "$summary_py" "$HERE/device_check.py" summary "$WORK" "$OUT"
  tar -czf "$OUT/evidence.tar.gz" -C "$WORK" --exclude=./venv --exclude=./collections --exclude=./bin . 2>/dev/null
  echo "== done in $(($(date +%s) - T0))s; under $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  if [ -f "$OUT/summary.txt" ]; then
    cat "$OUT/summary.txt"
  else
    echo "no summary: see $WORK/steps/summary.log"
    return 1
  fi
}

main "$@" 2>&1 | tee "$OUT/run.log"
