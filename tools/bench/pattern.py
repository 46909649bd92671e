#!/usr/bin/env python3
"""pattern.py BYTES: write BYTES bytes (suffixes K, M, G) of a deterministic
pattern to standard output, in 1 MiB writes.

64 distinct 1 MiB chunks (seeded), each 4 KiB page half random bytes, half a
repeated text line: it compresses about 2:1, so every block costs the
compressor real work, it has no zero blocks (no holes found), and since
the 8 bytes at the start of every 128 KiB block carry a running counter, no two
blocks are equal (block-level dedup finds nothing; sqfs-stage and sqfs-pack
dedup whole files and tails only anyway).  Generating it costs a memcpy per
MiB, negligible next to the writer."""
import random
import struct
import sys

units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
arg = sys.argv[1]
total = int(arg[:-1]) * units[arg[-1].upper()] if arg[-1].upper() in units else int(arg)
rng = random.Random(20)
fill = (b"the quick brown fox jumps over the lazy dog 0123456789 " * 40)[:2048]
chunks = []
for _ in range(64):
    c = bytearray()
    for _ in range(256):
        c += rng.randbytes(2048) + fill
    chunks.append(c)
out = sys.stdout.buffer
blk = 0
i = 0
while total > 0:
    c = bytearray(chunks[i % 64])
    for off in range(0, 1 << 20, 128 << 10):
        struct.pack_into("<Q", c, off, blk)
        blk += 1
    n = min(total, 1 << 20)
    out.write(c[:n] if n < (1 << 20) else c)
    total -= n
    i += 1
out.flush()
