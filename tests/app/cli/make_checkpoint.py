#!/usr/bin/python3
"""Re-saves a model folder's model.safetensors as a nanoGPT-style torch.save checkpoint
({"model": state dict under 'transformer.' names, "iter_num": ...}), alone in DST's folder: no
config.json, no tokenizer. The command-line and GUI tests open it as a researcher's checkpoint.

Usage: make_checkpoint.py SRC/model.safetensors DST/ckpt.pt   (Debian's python3-torch)"""
import collections
import json
import os
import struct
import sys

import numpy as np
import torch

src, dst = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
sd = collections.OrderedDict()
for name, info in header.items():
    if name == "__metadata__":
        continue
    b, e = info["data_offsets"]
    dtype = {"F32": np.float32, "F16": np.float16}[info["dtype"]]
    data = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=dtype).copy().reshape(info["shape"])
    sd["transformer." + name] = torch.from_numpy(data)
os.makedirs(os.path.dirname(dst), exist_ok=True)
torch.save({"model": sd, "iter_num": 1}, dst)
