#!/usr/bin/env python3
"""load.py: the parts of test_load.sh that are easier in Python.

  load.py mktree DIR SEED
      a source tree: directories, small and large files (text, random,
      zeros, sparse), symlinks, hard links; fixed modes and times.
  load.py make DIR SEED (--until EPOCH_SECONDS | --rounds N) [--out FILE]
              [--ref REFDIR]
      a "make -j" style writer in DIR: each round writes sources through a
      temporary name renamed over the old one, object files in appended
      pieces, an archive that keeps growing by appends, dependency files
      made and deleted, scratch directories, a linked binary renamed over.
      Every round is a function of SEED and the round number only, so N
      rounds give the same tree anywhere.  With --until it runs whole rounds
      until the time is past and writes the number done to FILE.  With
      --ref each round is made in REFDIR too, right after DIR.
  load.py settle DIR T
      every entry's mtime (and atime) to T (not following symlinks).
"""
import os
import random
import sys
import time


def content(r, n):
    kind = r.randrange(4)
    if kind == 0:
        return r.randbytes(n)
    if kind == 1:
        line = b"int f%d(int x) { return x * %d; }\n" % (r.randrange(999), r.randrange(999))
        return (line * (n // len(line) + 1))[:n]
    if kind == 2:
        return bytes(n)
    return (r.randbytes(64) * (n // 64 + 1))[:n]


def mktree(root, seed):
    r = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    dirs = [root]
    for i in range(40):
        d = os.path.join(r.choice(dirs), "dir%02d" % i)
        os.mkdir(d)
        dirs.append(d)
    files = []
    for i in range(300):
        p = os.path.join(r.choice(dirs), "file%03d%s" % (i, r.choice([".c", ".h", ".txt", ""])))
        n = r.choice([0, 1, 100, 1000, 4096, 5000, 12000, 40000, 70000]) if i % 100 else \
            r.choice([300000, 1 << 20])
        with open(p, "wb") as f:
            f.write(content(r, n))
        os.chmod(p, r.choice([0o644, 0o600, 0o755, 0o444]))
        files.append(p)
    # a sparse file
    with open(os.path.join(root, "sparse.img"), "wb") as f:
        f.truncate(1 << 20)
        f.seek(1 << 19)
        f.write(b"middle" * 1000)
    for i in range(20):
        a = r.choice(files)
        os.link(a, os.path.join(os.path.dirname(a), "hl%02d" % i))
    for i in range(20):
        d = r.choice(dirs)
        os.symlink(os.path.relpath(r.choice(files), d), os.path.join(d, "sl%02d" % i))
    settle(root, 1600000000)


def settle(root, t):
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            os.utime(os.path.join(dp, n), (t, t), follow_symlinks=False)
    os.utime(root, (t, t))


def write_file(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)


def make_round(root, seed, k):
    r = random.Random(seed * 1000003 + k)
    src, obj, tmp = (os.path.join(root, d) for d in ("src", "obj", "tmp"))
    for d in (src, obj):
        os.makedirs(d, exist_ok=True)
    for j in range(r.randrange(10, 40)):
        name = "m%02d.c" % r.randrange(60)
        t = os.path.join(src, "." + name + ".tmp")
        write_file(t, content(r, r.randrange(1, 20000)))
        os.rename(t, os.path.join(src, name))		# over the old one
        o = os.path.join(obj, name[:-2] + ".o")
        with open(o, "wb") as f:		# an object file in pieces
            for _ in range(r.randrange(1, 6)):
                f.write(content(r, r.randrange(1, 30000)))
        d = os.path.join(obj, name[:-2] + ".d")
        write_file(d, b"obj/%s: src/%s\n" % (name[:-2].encode() + b".o", name.encode()))
        if r.randrange(3) == 0:
            os.unlink(d)
    # an archive growing by appends, restarted when large
    a = os.path.join(root, "libm.a")
    if os.path.exists(a) and os.path.getsize(a) > (3 << 20):
        os.truncate(a, 0)
    with open(a, "ab") as f:
        for _ in range(r.randrange(1, 8)):
            f.write(content(r, r.randrange(1, 100000)))
    # removals, scratch directories
    for n in sorted(os.listdir(obj)):
        if r.randrange(8) == 0:
            os.unlink(os.path.join(obj, n))
    os.makedirs(os.path.join(tmp, "t%d" % (k % 3)), exist_ok=True)
    write_file(os.path.join(tmp, "t%d" % (k % 3), "scratch"), content(r, r.randrange(1, 5000)))
    if k % 3 == 2:
        for n in sorted(os.listdir(tmp)):
            os.unlink(os.path.join(tmp, n, "scratch"))
            os.rmdir(os.path.join(tmp, n))
    # link: a new binary renamed over the old, a hard link to the old one
    b = os.path.join(root, "prog")
    if os.path.exists(b):
        if os.path.exists(b + ".old"):
            os.unlink(b + ".old")
        os.link(b, b + ".old")
    write_file(b + ".new", content(r, r.randrange(1, 200000)))
    os.chmod(b + ".new", 0o755)
    os.rename(b + ".new", b)


def main():
    cmd = sys.argv[1]
    if cmd == "mktree":
        mktree(sys.argv[2], int(sys.argv[3]))
    elif cmd == "settle":
        settle(sys.argv[2], int(sys.argv[3]))
    elif cmd == "make":
        root, seed = sys.argv[2], int(sys.argv[3])
        os.makedirs(root, exist_ok=True)
        args = sys.argv[4:]
        out = args[args.index("--out") + 1] if "--out" in args else None
        roots = [root] + ([args[args.index("--ref") + 1]] if "--ref" in args else [])
        if "--rounds" in args:
            for k in range(int(args[args.index("--rounds") + 1])):
                for d in roots:
                    make_round(d, seed, k)
        else:
            until = float(args[args.index("--until") + 1])
            k = 0
            while k == 0 or time.time() < until:
                for d in roots:
                    make_round(d, seed, k)
                k += 1
            if out:
                write_file(out, b"%d\n" % k)
    else:
        sys.exit("usage: see load.py")


if __name__ == "__main__":
    main()
