"""Numba's workqueue threading layer (the frozen app's only one) aborts the process when two
threads launch parallel kernels at once; two passes call the front-end from several stage threads."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, sys, threading
os.environ["NUMBA_THREADING_LAYER"] = "workqueue"
sys.path.insert(0, sys.argv[1])
import numpy as np
from app.accel import features, logmel
x = np.random.default_rng(0).standard_normal(32000).astype(np.float32)
mel = logmel.IncrementalLogMel(80, backend="cpu")
def work(i):
    for _ in range(150):
        features.frame_features(x, 320, backend="cpu")
        if i == 0:
            logmel.IncrementalLogMel(80, backend="cpu").features(x[:16000], 0)
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print("ok")
"""


def test_parallel_kernels_from_several_threads_under_the_workqueue_layer():
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-800:]
