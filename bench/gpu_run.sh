#!/usr/bin/env bash
# The e2e half of an experiment on a GPU machine, from the bundle of bench/gpu_bundle.py
# (docs/results.md §0u). Run from the repository root there; the results go to $OUT.
#   bash bench/gpu_run.sh check                      # first call: unpack .gpu/a, check the image
#   bash bench/gpu_run.sh run CONFIG [LIMIT_S] [JOBS] # second call: .gpu/b, the trainings and scores
set -u
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 bench/gpu_bundle.py unpack --bundle .gpu || exit 1
if [ "$1" = check ]; then
  nvidia-smi -L
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
  python3 -c "import soundfile, jiwer; from deid_speech.e2e import infer, train; from deid_speech.asr import trainer, vad; from deid_speech.eval import cli; print('imports ok')"
  exit $?
fi
CONFIG=$2; LIMIT=${3:-470}; JOBS=${4:-10}
OUTDIR=$(python3 -c "from pathlib import Path; from deid_speech.experiment import ExperimentConfig; print(ExperimentConfig.load(Path('$CONFIG')).out_dir)")
start=$(date +%s)
timeout -k 10 "$LIMIT" python3 -m deid_speech experiment --config "$CONFIG" --system e2e --jobs "$JOBS" --progress off > "$OUT/experiment.log" 2>&1
echo "experiment exit $? after $(( $(date +%s) - start )) s"
python3 -m deid_speech experiment --config "$CONFIG" --system e2e --report --progress off > /dev/null 2>&1
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
tar czf "$OUT/results.tgz" --exclude='*.safetensors' --exclude='checkpoint' --exclude='*.opus' --exclude='*.bin' \
    -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")"
tail -5 "$OUT/experiment.log"; ls -la "$OUT"
