"""Write evaluation results: ``results.json``, ``results.md`` (tables), ``results.csv``
(one row per system x label) and ``results.png`` (per-label precision/recall/F1 bars)."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from deid_speech.audio import write_text_atomic
from deid_speech.types import LABELS


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown(results: dict) -> str:
    """The summary table (one row per system) and a per-label table per system."""
    systems = results["systems"]
    out = [f"# Evaluation: {results.get('manifest', '')}", "",
           f"{results['n_files']} files, {results['audio_s']:.0f} s of audio, {results['n_entities']} entities; "
           f"ASR {results.get('asr_model', '-')}; {results['wall_s']:.0f} s wall.", "",
           "Timestamp overlap (the paper's metric; label-agnostic, then label-exact), audio leak, text "
           "scores on the Whisper transcript, WER and residual risk per call (mean ± std; pass = mean + std < 5).",
           "",
           "| system | P | R | F1 | P exact | R exact | F1 exact | leaked time % | leaky entities % | "
           "over-redaction % | SPriV % | WER % | risk mean ± std | risk pass |",
           "|---|" + "---:|" * 12 + "---|"]
    for name, s in systems.items():
        a, e, lk, r = (s["timestamp_overlap"]["overall"], s["timestamp_overlap_label_exact"]["overall"],
                       s["audio_leak"], s["residual_risk"])
        out.append(f"| {name} | {_pct(a['precision'])} | {_pct(a['recall'])} | **{_pct(a['f1'])}** | "
                   f"{_pct(e['precision'])} | {_pct(e['recall'])} | {_pct(e['f1'])} | "
                   f"{_pct(lk['leaked_duration'])} | {_pct(lk['leaky_entities'])} | {_pct(lk['over_redaction'])} | "
                   f"{_pct(s['spriv']['spriv'])} | {_pct(s['wer'])} | {r['mean']:.2f} ± {r['std']:.2f} | "
                   f"{'yes' if r['passed'] else 'no'} |")
    for name, s in systems.items():
        out += ["", f"## {name}: per label (label-exact timestamp overlap; recall whatever the label; leak)", "",
                "| label | n true | n pred | P | R | F1 | R any label | leaked time % |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        agnostic = s["timestamp_overlap"]["per_label"]
        leak = s["audio_leak"].get("per_label", {})
        for label, c in _per_label(s).items():
            p = _pct(c["precision"]) if c["n_pred"] else "–"  # no predictions: precision undefined
            r_any = _pct(agnostic[label]["recall"]) if label in agnostic and agnostic[label]["n_true"] else "–"
            lk = _pct(leak[label]) if label in leak else "–"
            out.append(f"| {label} | {c['n_true']} | {c['n_pred']} | {p} | "
                       f"{_pct(c['recall'])} | {_pct(c['f1'])} | {r_any} | {lk} |")
        if causes := s["audio_leak"].get("over_redaction_by_cause"):
            out += ["", f"Over-redaction {_pct(s['audio_leak']['over_redaction'])} % of the other speech, by cause: "
                    + "; ".join(f"{k} {_pct(v)} %" for k, v in causes.items()) + "."]
    return "\n".join(out) + "\n"


def _per_label(s: dict) -> dict[str, dict]:
    per = s["timestamp_overlap_label_exact"]["per_label"]
    return {k: per[k] for k in LABELS if k in per}


def csv_text(results: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["system", "label", "precision", "recall", "f1", "n_true", "n_pred", "scoring"])
    for name, s in results["systems"].items():
        for scoring, key in (("agnostic", "timestamp_overlap"), ("label_exact", "timestamp_overlap_label_exact")):
            o = s[key]["overall"]
            w.writerow([name, "ALL", o["precision"], o["recall"], o["f1"], o["n_true"], o["n_pred"], scoring])
        for label, c in _per_label(s).items():
            w.writerow([name, label, c["precision"], c["recall"], c["f1"], c["n_true"], c["n_pred"], "label_exact"])
    return buf.getvalue()


def plot(results: dict, path: Path) -> None:
    """Per-label P/R/F1 bars, one panel per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    systems = results["systems"]
    fig, axes = plt.subplots(len(systems), 1, figsize=(10, 3.2 * len(systems)), squeeze=False)
    for ax, (name, s) in zip(axes[:, 0], systems.items()):
        per = _per_label(s)
        x = np.arange(len(per))
        for k, (metric, colour) in enumerate((("precision", "#4c72b0"), ("recall", "#dd8452"), ("f1", "#55a868"))):
            vals = [np.nan if metric == "precision" and not c["n_pred"] else c[metric] for c in per.values()]
            ax.bar(x + (k - 1) * 0.27, vals, 0.27, label=metric, color=colour)  # no bar: nothing predicted
        ax.set_xticks(x, list(per), rotation=20, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{name}: per-label timestamp-overlap scores (label-exact)", fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


RESULT_FILES = tuple(f"results.{x}" for x in ("json", "md", "csv", "png"))


def write_results(results: dict, out_dir: Path) -> list[Path]:
    """Write the four files into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f for f in RESULT_FILES]
    write_text_atomic(paths[0], json.dumps(results, indent=2) + "\n")
    write_text_atomic(paths[1], markdown(results))
    write_text_atomic(paths[2], csv_text(results))
    plot(results, paths[3])
    return paths
