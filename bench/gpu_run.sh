#!/usr/bin/env bash
# The e2e half of an experiment on a GPU machine, from the bundle of bench/gpu_bundle.py
# (docs/results.md §0u). Run from the repository root there; the results go to $OUT.
# A path carried in one call is gone in the next call that does not carry it, so both parts
# are copied to /tmp, where a later call on the same (warm) machine finds them:
#   bash bench/gpu_run.sh check                  # call 1, carry .gpu/a: /tmp/gpu-a, the image checked
#   bash bench/gpu_run.sh stage                  # call 2, carry .gpu/c (the arms' audio): /tmp/gpu-c
#   bash bench/gpu_run.sh run CONFIG [LIMIT_S] [JOBS]
#                                                # call 3, carry .gpu/b: /tmp/gpu-b with /tmp/gpu-c laid over
#                                                # it, trainings and scores; again with nothing carried to
#                                                # resume after a time limit
# CONFIG is relative to the bundle's part b (configs/experiments/small-llm-gpu.toml).
set -u
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ "$1" = check ]; then
  if [ -d .gpu/a ] && [ ! -L .gpu/a ]; then rm -rf /tmp/gpu-a; cp -r .gpu/a /tmp/gpu-a || exit 1; fi
  python3 bench/gpu_bundle.py unpack --part /tmp/gpu-a || exit 1
  nvidia-smi -L
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
  python3 -c "import soundfile, jiwer; from deid_speech.e2e import infer, train; from deid_speech.asr import trainer, vad; from deid_speech.eval import cli; print('imports ok')"
  exit $?
fi
if [ "$1" = stage ]; then
  [ -d .gpu/c ] && [ ! -L .gpu/c ] || { echo "no .gpu/c carried: carry it with this call"; exit 1; }
  rm -rf /tmp/gpu-c; cp -r .gpu/c /tmp/gpu-c && du -sh /tmp/gpu-c
  exit $?
fi
[ -d /tmp/gpu-a/base-hf ] || { echo "no /tmp/gpu-a: run 'check' first, on this machine"; exit 1; }
[ -d /tmp/gpu-c ] || { echo "no /tmp/gpu-c: run 'stage' first, on this machine"; exit 1; }
if [ ! -d /tmp/gpu-b ]; then cp -r .gpu/b /tmp/gpu-b || exit 1; fi
cp -r /tmp/gpu-c/. /tmp/gpu-b/ || exit 1  # every run: a resume after an interrupted copy has it too
python3 bench/gpu_bundle.py unpack --part /tmp/gpu-b || exit 1
mkdir -p .gpu && { [ -e .gpu/a ] || ln -s /tmp/gpu-a .gpu/a; }  # the config's --base .gpu/a/base-hf
CONFIG=/tmp/gpu-b/$2; LIMIT=${3:-540}; JOBS=${4:-10}
OUTDIR=$(python3 -c "from pathlib import Path; from deid_speech.experiment import ExperimentConfig; print(ExperimentConfig.load(Path('$CONFIG')).out_dir)")
start=$(date +%s)
timeout -k 10 "$LIMIT" python3 -m deid_speech experiment --config "$CONFIG" --system e2e --jobs "$JOBS" --progress off > "$OUT/experiment.log" 2>&1
echo "experiment exit $? after $(( $(date +%s) - start )) s"
python3 -m deid_speech experiment --config "$CONFIG" --system e2e --report --progress off > /dev/null 2>&1
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
tar czf "$OUT/results.tgz" --exclude='*.safetensors' --exclude='checkpoint' --exclude='*.opus' --exclude='*.bin' \
    -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")"
tail -5 "$OUT/experiment.log"; ls -la "$OUT"
