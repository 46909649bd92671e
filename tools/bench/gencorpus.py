#!/usr/bin/env python3
"""gencorpus.py DIR SIZE [SEED]: write a deterministic synthetic corpus into DIR.

SIZE is "small" (~48 MiB, ~2 500 entries: validation runs) or "full"
(~1 GiB, ~60 000 entries: close to the debian corpus).  The same SIZE and
SEED give the same tree, byte for byte (names, contents, modes, mtimes,
links), on any machine with Python >= 3.9.

Distribution (documented in tools/README):
  regular files  sizes log-normal, median 2.5 KiB, sigma 1.8, cut at 4 MiB
                 (the bulk: many small files, as in /usr), plus "large" files
                 (full: 0.02 % of files, 8..32 MiB; small: 0.3 %, 1..4 MiB);
  contents       by file: 65 % text-like (slices of a seeded word salad,
                 compresses ~3-4:1), 20 % binary-like (bytes from a skewed
                 32-symbol alphabet, ~1.5-2:1), 15 % incompressible (seeded
                 random bytes); large files: half incompressible;
  duplicates     3 % of regular files are byte copies of an earlier file;
  hard links     1 % of entries are hard links to an earlier regular file;
  symlinks       2 % of entries, relative, to an earlier file (1 in 10 dangles);
  empty files    the log-normal's draws under 16 bytes are written as empty;
  directories    a tree of fan-out up to 12, depth up to 6, ~25 entries each;
  metadata       modes 0644 / 0755 (10 % of files), directories 0755, every
                 mtime a seeded time in 2020-2024; owner = the caller.
At the end a summary (counts and bytes per class) is printed and written to
DIR/../SIZE.manifest (outside the tree).
"""
import math
import os
import random
import sys

PARAMS = {
    # entries (files + links), large file range, large fraction
    "small": dict(entries=2500, large=(1 << 20, 4 << 20), large_frac=0.003),
    "full": dict(entries=60000, large=(8 << 20, 32 << 20), large_frac=0.0002),
}
MEDIAN = 2560
SIGMA = 1.8
CAP = 4 << 20
DUP_FRAC = 0.03
HARD_FRAC = 0.01
SYM_FRAC = 0.02
T0 = 1577836800  # 2020-01-01
T1 = 1735689600  # 2025-01-01


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in PARAMS:
        sys.exit("usage: gencorpus.py DIR small|full [SEED]")
    root, size = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    p = PARAMS[size]
    rng = random.Random(seed)
    os.makedirs(root, exist_ok=False)

    # Pools, generated once: files are slices of them (fast, deterministic).
    words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]
    text = []
    n = 0
    while n < (4 << 20):
        line = " ".join(rng.choice(words) for _ in range(rng.randint(3, 14))) + "\n"
        text.append(line)
        n += len(line)
    text = "".join(text).encode()
    alphabet = bytes(rng.sample(range(256), 32))
    weights = [1.0 / (i + 1) for i in range(32)]
    semi = bytes(rng.choices(alphabet, weights, k=4 << 20))

    def content(kind, length):
        if length == 0:
            return b""
        if kind == "rand":
            return rng.randbytes(length)
        pool = text if kind == "text" else semi
        out = bytearray()
        while len(out) < length:
            off = rng.randrange(0, len(pool) - 4096)
            out += pool[off:off + rng.randint(512, 65536)]
        return bytes(out[:length])

    # Directory tree.
    dirs = [""]
    ndirs = max(4, p["entries"] // 25)
    while len(dirs) < ndirs:
        parent = rng.choice(dirs)
        if parent.count("/") >= 6 or sum(1 for d in dirs if os.path.dirname(d) == parent) >= 12:
            continue
        d = os.path.join(parent, "d%04d" % len(dirs))
        dirs.append(d)
        os.mkdir(os.path.join(root, d))

    files = []  # relative paths of regular files
    stats = dict(regular=0, regular_bytes=0, empty=0, large=0, large_bytes=0, dup=0,
                 hardlink=0, symlink=0, dangling=0, text=0, binary=0, rand=0,
                 rand_bytes=0, dirs=len(dirs))
    for i in range(p["entries"]):
        d = rng.choice(dirs)
        name = os.path.join(d, "f%06d%s" % (i, rng.choice([".txt", ".so", ".dat", "", ".h", ".py"])))
        path = os.path.join(root, name)
        r = rng.random()
        if files and r < SYM_FRAC:
            if rng.random() < 0.1:
                target = "missing-%d" % i
                stats["dangling"] += 1
            else:
                target = os.path.relpath(rng.choice(files), d or ".")
            os.symlink(target, path)
            t = rng.randint(T0, T1)
            os.utime(path, (t, t), follow_symlinks=False)
            stats["symlink"] += 1
            continue
        if files and r < SYM_FRAC + HARD_FRAC:
            os.link(os.path.join(root, rng.choice(files)), path)
            stats["hardlink"] += 1
            continue
        if files and r < SYM_FRAC + HARD_FRAC + DUP_FRAC:
            with open(os.path.join(root, rng.choice(files)), "rb") as f:
                data = f.read()
            stats["dup"] += 1
        elif rng.random() < p["large_frac"]:
            length = rng.randint(*p["large"])
            kind = "rand" if rng.random() < 0.5 else "text"
            data = content(kind, length)
            stats["large"] += 1
            stats["large_bytes"] += length
            stats[kind] += 1
            if kind == "rand":
                stats["rand_bytes"] += length
        else:
            length = int(min(CAP, MEDIAN * math.exp(rng.gauss(0, SIGMA))))
            if length < 16:
                length = 0
                stats["empty"] += 1
            x = rng.random()
            kind = "text" if x < 0.65 else ("binary" if x < 0.85 else "rand")
            data = content("semi" if kind == "binary" else kind, length)
            stats[kind] += 1
            if kind == "rand":
                stats["rand_bytes"] += length
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755 if rng.random() < 0.1 else 0o644)
        t = rng.randint(T0, T1)
        os.utime(path, (t, t))
        files.append(name)
        stats["regular"] += 1
        stats["regular_bytes"] += len(data)
    # Directory times last (children changed them), deepest first.
    for d in sorted(dirs, key=lambda s: -s.count("/")):
        t = rng.randint(T0, T1)
        os.utime(os.path.join(root, d), (t, t))
    summary = "generated corpus size=%s seed=%d: " % (size, seed) + ", ".join(
        "%s=%d" % kv for kv in stats.items())
    print(summary)
    with open(os.path.join(os.path.dirname(os.path.abspath(root)), size + ".manifest"), "w") as f:
        f.write(summary + "\n")


if __name__ == "__main__":
    main()
