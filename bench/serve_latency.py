"""Latency of `deid-speech serve` (real models, loopback): p50/p95 of a synchronous
`POST /v1/redact?sync=true` for a 10 s and a 60 s file (cut from the example call) at 1 and
4 concurrent clients, ``--requests`` per client; the server runs as a subprocess with the
default cascade, one worker thread (so 4 clients queue behind each other).

    .venv/bin/python bench/serve_latency.py --requests 3 --out bench/results/serve_latency.json
"""
from __future__ import annotations

import argparse
import io
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import soundfile as sf

from common import report
from deid_speech import models

TOKEN = "bench-token-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3, help="requests per client")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    x, sr = sf.read(models.path("example"), dtype="float32")
    clips = {}
    for secs in (10, 60):
        buf = io.BytesIO()
        sf.write(buf, x[int(5 * sr):int((5 + secs) * sr)], sr, format="WAV")
        clips[secs] = buf.getvalue()
    port = _free_port()
    with tempfile.TemporaryDirectory() as work:
        env = {**os.environ, "DEID_SPEECH_TOKEN": TOKEN}
        exe = str(Path(sys.executable).with_name("deid-speech"))
        t0 = time.perf_counter()
        proc = subprocess.Popen([exe, "serve", "--port", str(port), "--work-dir", work, "--queue-size", "16"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            while True:
                try:
                    httpx.get(f"{url}/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            startup = time.perf_counter() - t0
            rows = []
            for secs, data in clips.items():
                for clients in (1, 4):
                    lat: list[float] = []

                    def client(data=data, lat=lat):
                        for _ in range(args.requests):
                            t = time.perf_counter()
                            r = httpx.post(f"{url}/v1/redact", params={"sync": "true"}, timeout=600,
                                           headers={"Authorization": f"Bearer {TOKEN}"},
                                           files={"file": ("call.wav", data, "audio/wav")})
                            assert r.status_code == 200 and r.json()["state"] == "done", r.text
                            lat.append(time.perf_counter() - t)

                    threads = [threading.Thread(target=client) for _ in range(clients)]
                    t = time.perf_counter()
                    for th in threads:
                        th.start()
                    for th in threads:
                        th.join()
                    wall = time.perf_counter() - t
                    rows.append({"file_s": secs, "clients": clients, "requests": len(lat),
                                 "p50_s": round(statistics.median(lat), 2), "p95_s": round(_pct(lat, 0.95), 2),
                                 "audio_h_per_wall_h": round(secs * len(lat) / wall, 1)})
                    print(rows[-1], flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    result = {"cpus": os.cpu_count(), "server_startup_s": round(startup, 1), "runs": rows}
    report(result, args.out)


if __name__ == "__main__":
    main()
