#!/usr/bin/env python3
"""mkfiles.py DIR N SIZE: create N regular files of SIZE bytes under DIR,
1000 per subdirectory (DIR/dNNNN/fNNNNNNN).  Each file's bytes are distinct
(its index, then a fixed text pattern), so no two files are duplicates."""
import os
import sys

root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pat = (b"sqfs-stage benchmark small file, deterministic filler text. " * (size // 60 + 2))
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    head = b"%012d\n" % i
    with open(os.path.join(d, "f%07d" % i), "wb") as f:
        f.write((head + pat)[:size])
