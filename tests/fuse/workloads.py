#!/usr/bin/env python3
"""workloads.py: deterministic workloads for test_workloads.sh.

Each workload is a function of a seed only, so running it into a sqfs-stage
mount and into a plain directory must give equal trees (the caller compares
them and their images).

  workloads.py writers ROOT N [--serial]
      N processes at once (one after the other with --serial) each build a
      subtree ROOT/wK: files of many sizes written with per-writer write
      sizes and orders, hard links, symlinks, xattrs, modes, owners.
  workloads.py randwrite ROOT MODEL SEED
      files ROOT/rw/fK get random-offset random-size pwrite()s, O_APPEND
      writes, truncates, mmap writes, reopenings and read-back checks; an
      in-memory model of every file decides.  At the end each file is read
      back and compared with its model, and the models are written to
      MODEL/rw/fK.  Exit 1 on a difference.
  workloads.py churn ROOT LOG SEED
      overwrite-after-close, rename (over files, of directories, exchange),
      unlink (also of open files), link, symlink, mkdir/rmdir, xattr and
      chmod churn in ROOT/churn.  Each operation is chosen from the sorted
      listing of the tree itself and logged with its outcome (ok or the
      errno name) in LOG: two runs must write equal logs.
  workloads.py build ROOT SEED ORDER
      one tree (from SEED) built in ORDER "sorted" (sorted creation, one
      write() per file) or "shuffled" (random creation order, files written
      in random-size chunks in random order, via temporary names renamed
      into place, grown then cut back, closed and reopened, hard links made
      before the data, junk files made and removed).
  workloads.py settle ROOT T
      every entry's mtime set to T plus a function of its path (so two equal
      trees get equal times whenever they were built).
"""
import ctypes
import errno
import mmap
import os
import random
import stat
import sys
import zlib

libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def data(rng, n):
    """n bytes: random, compressible runs, zeros, in a mix."""
    out = bytearray()
    while len(out) < n:
        k = min(n - len(out), rng.choice([1, 100, 4096, 65536, 131072, 300000]))
        kind = rng.randrange(4)
        if kind == 0:
            out += rng.randbytes(k)
        elif kind == 1:
            out += (rng.randbytes(16) * (k // 16 + 1))[:k]
        elif kind == 2:
            out += bytes(k)
        else:
            out += (b"line %d of some text\n" % rng.randrange(10**6)) * (k // 24 + 1)
            del out[n:]
    return bytes(out[:n])


SIZES = [0, 1, 17, 4095, 4096, 4097, 65535, 65536, 65537, 131072, 131073,
         200000, 1 << 20, (1 << 20) + 3]


def write_chunks(path, content, chunk, reverse=False):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    offs = list(range(0, len(content), chunk))
    if reverse:
        offs.reverse()
    for o in offs:
        os.pwrite(fd, content[o:o + chunk], o)
    os.close(fd)


# --- writers --------------------------------------------------------------

def one_writer(root, k):
    rng = random.Random(1000 + k)
    top = os.path.join(root, "w%d" % k)
    os.mkdir(top, 0o755)
    chunk = [4096, 1000, 65536, 131072, 777, 1 << 20, 12345, 8192][k % 8]
    files = []
    for d in range(4):
        dd = os.path.join(top, "d%d" % d, "sub")
        os.makedirs(dd)
        for i in range(8):
            p = os.path.join(dd if i % 2 else os.path.dirname(dd), "f%d" % i)
            size = rng.choice(SIZES) if rng.random() < 0.6 else rng.randrange(600000)
            write_chunks(p, data(rng, size), chunk, reverse=(k + i) % 3 == 0)
            files.append(p)
    # the same content in every writer: deduplicated across subtrees
    write_chunks(os.path.join(top, "common"), data(random.Random(7), 300000), chunk)
    os.link(files[0], os.path.join(top, "hard0"))
    os.link(files[3], os.path.join(top, "d1", "hard3"))
    os.symlink("d0/f0", os.path.join(top, "sym"))
    os.symlink("/abs/%d" % k, os.path.join(top, "d2", "abs"))
    os.mkfifo(os.path.join(top, "fifo"))
    os.setxattr(files[1], "user.writer", b"%d" % k)
    os.setxattr(top, "trusted.t", b"x" * (k + 1))
    os.chmod(files[2], 0o4711)
    os.chown(files[4], 1000 + k, 2000 + k)
    os.chmod(os.path.join(top, "d3"), 0o2775)


def writers(root, n, serial):
    if serial:
        for k in range(n):
            one_writer(root, k)
        return 0
    pids = []
    for k in range(n):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                one_writer(root, k)
            except BaseException as e:  # report and fail, whatever it was
                print("writer %d: %r" % (k, e), file=sys.stderr)
                code = 1
            os._exit(code)
        pids.append(pid)
    bad = 0
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        bad |= st != 0
    return 1 if bad else 0


# --- random writes against a model ------------------------------------------

def randwrite(root, model_root, seed):
    rng = random.Random(seed)
    d = os.path.join(root, "rw")
    os.mkdir(d)
    nfiles = 6
    names = [os.path.join(d, "f%d" % i) for i in range(nfiles)]
    models = [bytearray() for _ in names]
    fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o644) for p in names]
    bad = 0

    def check(i, what):
        nonlocal bad
        st = os.fstat(fds[i])
        if st.st_size != len(models[i]):
            print("rw f%d after %s: size %d, model %d" % (i, what, st.st_size, len(models[i])))
            bad += 1
            return
        if len(models[i]):
            o = rng.randrange(len(models[i]))
            n = rng.randrange(1, 200000)
            got = os.pread(fds[i], n, o)
            if got != bytes(models[i][o:o + n]):
                print("rw f%d after %s: pread(%d, %d) differs from the model" % (i, what, n, o))
                bad += 1

    for step in range(600):
        i = rng.randrange(nfiles)
        m = models[i]
        op = rng.random()
        if op < 0.55:   # pwrite anywhere, beyond the end too (a hole)
            o = rng.randrange(3 << 20)
            n = rng.choice([1, 7, 512, 4096, 4097, 65536, 131072, 131073, rng.randrange(1, 400000)])
            buf = data(rng, n)
            os.pwrite(fds[i], buf, o)
            if o > len(m):
                m.extend(bytes(o - len(m)))
            m[o:o + n] = buf
            what = "pwrite(%d, %d)" % (n, o)
        elif op < 0.65:  # O_APPEND through another descriptor
            buf = data(rng, rng.randrange(1, 100000))
            fd = os.open(names[i], os.O_WRONLY | os.O_APPEND)
            os.write(fd, buf)
            os.close(fd)
            m.extend(buf)
            what = "append(%d)" % len(buf)
        elif op < 0.75:  # ftruncate, shorter or longer
            n = rng.randrange(3 << 20)
            os.ftruncate(fds[i], n)
            if n < len(m):
                del m[n:]
            else:
                m.extend(bytes(n - len(m)))
            what = "ftruncate(%d)" % n
        elif op < 0.82:  # close and reopen (overwrite after close follows)
            os.close(fds[i])
            fds[i] = os.open(names[i], os.O_RDWR)
            what = "reopen"
        elif op < 0.87 and len(m) > 0:  # a shared writable mapping
            with mmap.mmap(fds[i], len(m)) as mp:
                o = rng.randrange(len(m))
                n = min(rng.randrange(1, 50000), len(m) - o)
                buf = rng.randbytes(n)
                mp[o:o + n] = buf
                mp.flush()
            m[o:o + n] = buf
            what = "mmap write(%d, %d)" % (n, o)
        elif op < 0.90:  # truncate by path with O_TRUNC, then a little data
            os.close(fds[i])
            fds[i] = os.open(names[i], os.O_RDWR | os.O_TRUNC)
            buf = data(rng, rng.randrange(0, 70000))
            os.write(fds[i], buf)
            m[:] = buf
            what = "O_TRUNC + write(%d)" % len(buf)
        else:
            os.fsync(fds[i])
            what = "fsync"
        if step % 7 == 0:
            check(i, what)
    for i, fd in enumerate(fds):
        os.close(fd)
        with open(names[i], "rb") as f:
            got = f.read()
        if got != bytes(models[i]):
            first = next((j for j in range(min(len(got), len(models[i])))
                          if got[j] != models[i][j]), min(len(got), len(models[i])))
            print("rw f%d: final content differs from the model (size %d vs %d, first at %d)"
                  % (i, len(got), len(models[i]), first))
            bad += 1
    md = os.path.join(model_root, "rw")
    os.mkdir(md)
    for i, m in enumerate(models):
        with open(os.path.join(md, "f%d" % i), "wb") as f:
            f.write(m)
    return 1 if bad else 0


# --- churn -----------------------------------------------------------------

def listing(top):
    """Sorted relative paths of files (incl. symlinks) and directories, and
    the set of symlinks.  One scandir per directory, types from d_type: the
    listing runs before every step, so an lstat per entry would be most of
    the run's FUSE requests."""
    files, dirs, links = [], [], set()

    def walk(rel):
        dirs.append(rel)
        with os.scandir(os.path.join(top, rel)) as it:
            entries = list(it)
        for e in entries:
            r = os.path.normpath(os.path.join(rel, e.name))
            if e.is_dir(follow_symlinks=False):
                walk(r)
            else:
                files.append(r)
                if e.is_symlink():
                    links.add(r)
    walk(".")
    return sorted(files), sorted(dirs), links


def churn(root, logpath, seed):
    rng = random.Random(seed)
    top = os.path.join(root, "churn")
    os.mkdir(top)
    for d in ("a", "b", "c", "a/x", "b/y"):
        os.mkdir(os.path.join(top, d))
    log = open(logpath, "w")
    held = []    # (fd, model bytes) of open files, maybe unlinked
    bad = 0

    def P(rel):
        return os.path.join(top, rel)

    def newname(dirs):
        return os.path.normpath(os.path.join(rng.choice(dirs), "n%d" % rng.randrange(40)))

    for step in range(1500):
        files, dirs, links = listing(top)
        regs = [f for f in files if f not in links]
        op = rng.randrange(15)
        desc = ""
        try:
            if op == 0 or not regs:         # create or replace with new data
                name = newname(dirs)
                desc = "write %s" % name
                with open(P(name), "wb") as f:
                    f.write(data(rng, rng.choice([0, 10, 5000, 70000, 200000])))
            elif op == 1:                   # overwrite after close, in place
                name = rng.choice(regs)
                desc = "overwrite %s" % name
                with open(P(name), "r+b") as f:
                    f.seek(rng.randrange(os.path.getsize(P(name)) + 1))
                    f.write(data(rng, rng.randrange(1, 100000)))
            elif op == 2:                   # shorter rewrite (O_TRUNC)
                name = rng.choice(regs)
                desc = "rewrite-shorter %s" % name
                with open(P(name), "wb") as f:
                    f.write(data(rng, rng.randrange(0, 3000)))
            elif op == 3:                   # rename a file, maybe over another
                src = rng.choice(files)
                dst = rng.choice(files) if rng.random() < 0.5 else newname(dirs)
                desc = "rename %s %s" % (src, dst)
                os.rename(P(src), P(dst))
            elif op == 4:                   # rename a directory
                src, dst = rng.choice(dirs), newname(dirs)
                desc = "rename-dir %s %s" % (src, dst)
                os.rename(P(src), P(dst))
            elif op == 5:                   # unlink
                name = rng.choice(files)
                desc = "unlink %s" % name
                os.unlink(P(name))
            elif op == 6:                   # open, unlink, keep using it
                name = rng.choice(regs)
                desc = "unlink-open %s" % name
                fd = os.open(P(name), os.O_RDWR)
                content = bytearray(os.pread(fd, os.fstat(fd).st_size + 1, 0))
                os.unlink(P(name))
                buf = data(rng, rng.randrange(1, 50000))
                os.pwrite(fd, buf, len(content))
                content += buf
                # with no name left, nothing else can change it
                held.append((fd, content if os.fstat(fd).st_nlink == 0 else None, name))
            elif op == 7:                   # hard link
                src, dst = rng.choice(regs), newname(dirs)
                desc = "link %s %s" % (src, dst)
                os.link(P(src), P(dst))
            elif op == 8:                   # symlink, replacing through rename
                dst = newname(dirs)
                desc = "symlink %s" % dst
                tmp = P(dst) + ".tmp"
                os.symlink("target-%d" % rng.randrange(100), tmp)
                os.rename(tmp, P(dst))
            elif op == 9:                   # mkdir
                name = newname(dirs)
                desc = "mkdir %s" % name
                os.mkdir(P(name), rng.choice([0o755, 0o700, 0o2775]))
            elif op == 10:                  # rmdir (often ENOTEMPTY)
                name = rng.choice(dirs[1:] or ["a"])
                desc = "rmdir %s" % name
                os.rmdir(P(name))
            elif op == 11:                  # xattrs
                name = rng.choice(files + dirs)
                if os.path.islink(P(name)):
                    name = rng.choice(dirs)
                k = "user.k%d" % rng.randrange(3)
                if rng.random() < 0.7:
                    desc = "setxattr %s %s" % (name, k)
                    os.setxattr(P(name), k, rng.randbytes(rng.randrange(0, 200)))
                else:
                    desc = "removexattr %s %s" % (name, k)
                    os.removexattr(P(name), k)
            elif op == 12:                  # chmod
                name = rng.choice(regs)
                desc = "chmod %s" % name
                os.chmod(P(name), rng.choice([0o644, 0o600, 0o755, 0o4755, 0o444]))
            elif op == 13:                  # exchange two entries
                a, b = rng.choice(files + dirs[1:]), rng.choice(files + dirs[1:])
                desc = "exchange %s %s" % (a, b)
                if libc.renameat2(AT_FDCWD, P(a).encode(), AT_FDCWD, P(b).encode(),
                                  RENAME_EXCHANGE):
                    e = ctypes.get_errno()
                    raise OSError(e, os.strerror(e))
            else:                           # close a held file, check it
                if not held:
                    desc = "close-held none"
                else:
                    fd, content, name = held.pop(rng.randrange(len(held)))
                    got = os.pread(fd, os.fstat(fd).st_size + 1, 0)
                    os.close(fd)
                    desc = "close-held %s crc %08x" % (name, zlib.crc32(got))
                    if content is not None and got != bytes(content):
                        print("churn: unlinked open file %s: content differs" % name)
                        bad += 1
            log.write("%s: ok\n" % desc)
        except OSError as e:
            log.write("%s: %s\n" % (desc, errno.errorcode.get(e.errno, e.errno)))
    for fd, content, name in held:
        got = os.pread(fd, os.fstat(fd).st_size + 1, 0)
        log.write("end close-held %s crc %08x\n" % (name, zlib.crc32(got)))
        if content is not None and got != bytes(content):
            print("churn: unlinked open file %s: content differs" % name)
            bad += 1
        os.close(fd)
    log.close()
    return 1 if bad else 0


# --- one tree, two orders ----------------------------------------------------

def spec(seed):
    rng = random.Random(seed)
    dirs = ["d%d" % i for i in range(5)] + ["d%d/e%d" % (i, j) for i in range(5) for j in range(3)]
    dirs += ["d0/e0/deep", "d0/e0/deep/er", "empty"]
    files = {}
    for i in range(90):
        p = "%s/f%02d" % (rng.choice(dirs), i)
        size = rng.choice(SIZES) if rng.random() < 0.6 else rng.randrange(500000)
        files[p] = (rng.randrange(1 << 30), size)
    # duplicates (dedup) and a sparse-ish file
    for i in range(4):
        files["d%d/dup" % i] = (12345, 140000)
    files["d4/zeros"] = (None, 3 << 20)
    regs = sorted(files)
    hard = {"d1/hard-%d" % i: regs[i * 7] for i in range(4)}
    syms = {"d2/sym%d" % i: rng.choice(["../d0", "/abs/path", "x" * 200, regs[i]]) for i in range(4)}
    xattrs = {p: {"user.a": rng.randbytes(20)} for p in regs[::9]}
    xattrs["d3"] = {"user.dir": b"v", "trusted.overlay.opaque": b"y"}
    modes = {p: rng.choice([0o644, 0o600, 0o755, 0o4755, 0o2711, 0o444]) for p in regs[::5]}
    modes["d2"] = 0o1777
    owners = {p: (rng.randrange(5000), rng.randrange(5000)) for p in regs[::6]}
    owners["d4"] = (65534, 65534)
    specials = {"fifo": stat.S_IFIFO | 0o644, "d0/chr": stat.S_IFCHR | 0o600,
                "d0/blk": stat.S_IFBLK | 0o660}
    return sorted(set(dirs)), files, hard, syms, xattrs, modes, owners, specials


def content_of(seed, size):
    return bytes(size) if seed is None else data(random.Random(seed), size)


def build(root, seed, order):
    dirs, files, hard, syms, xattrs, modes, owners, specials = spec(seed)
    rng = random.Random(seed * 31 + 7)
    if order == "sorted":
        for d in dirs:
            os.mkdir(os.path.join(root, d))
        for p in sorted(files):
            with open(os.path.join(root, p), "wb") as f:
                f.write(content_of(*files[p]))
        for p in sorted(hard):
            os.link(os.path.join(root, hard[p]), os.path.join(root, p))
        for p in sorted(syms):
            os.symlink(syms[p], os.path.join(root, p))
        for p in sorted(specials):
            os.mknod(os.path.join(root, p), specials[p], os.makedev(7, 3))
    else:
        for d in sorted(dirs, reverse=True):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        names = list(files)
        rng.shuffle(names)
        early_links = {v: k for k, v in hard.items()}
        for p in names:
            full = os.path.join(root, p)
            c = content_of(*files[p])
            tmp = full + ".part" if rng.random() < 0.4 else full
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            if p in early_links:      # the link exists before the data
                os.link(tmp, os.path.join(root, early_links[p]))
            # grown beyond, then cut back at the end
            if rng.random() < 0.3:
                os.ftruncate(fd, len(c) + rng.randrange(1, 300000))
            chunk = rng.choice([1, 511, 4096, 65536, 100000, 1 << 20])
            chunk = max(chunk, len(c) // 64 or 1)
            offs = list(range(0, len(c), chunk))
            rng.shuffle(offs)
            half = len(offs) // 2
            for o in offs[:half]:
                os.pwrite(fd, c[o:o + chunk], o)
            os.close(fd)              # ...and the rest after a reopen
            fd = os.open(tmp, os.O_RDWR)
            for o in offs[half:]:
                os.pwrite(fd, c[o:o + chunk], o)
            os.ftruncate(fd, len(c))
            os.close(fd)
            if tmp != full:
                os.rename(tmp, full)
            if rng.random() < 0.2:    # junk that comes and goes
                j = full + ".junk"
                with open(j, "wb") as f:
                    f.write(data(rng, 5000))
                os.unlink(j)
        for p in sorted(syms, reverse=True):
            os.symlink("placeholder", os.path.join(root, p) + ".t")
            os.rename(os.path.join(root, p) + ".t", os.path.join(root, p))
            os.unlink(os.path.join(root, p))
            os.symlink(syms[p], os.path.join(root, p))
        for p in sorted(specials, reverse=True):
            os.mknod(os.path.join(root, p), specials[p], os.makedev(7, 3))
    for d in dirs:
        os.chmod(os.path.join(root, d), 0o755)
    for p in files:
        os.chmod(os.path.join(root, p), 0o644)
    items = list(xattrs.items())
    if order != "sorted":
        rng.shuffle(items)
    for p, xs in items:
        for k, v in xs.items():
            os.setxattr(os.path.join(root, p), k, v)
    for p, (u, g) in sorted(owners.items()):
        os.chown(os.path.join(root, p), u, g)
    for p, m in sorted(modes.items()):   # after chown, which clears set-id bits
        os.chmod(os.path.join(root, p), m)
    return 0


def settle(root, t0):
    """Hard links get the time of their first path in sorted order, so
    that the directory order of the walk does not matter."""
    os.chmod(root, 0o755)
    first = {}
    for dp, dn, fn in os.walk(root):
        for n in fn + dn + ([""] if dp == root else []):
            p = os.path.join(dp, n) if n else dp
            rel = os.path.relpath(p, root).encode()
            st = os.lstat(p)
            key = (st.st_dev, st.st_ino)
            first[key] = min(first.get(key, rel), rel)
    for dp, dn, fn in os.walk(root):
        for n in fn + dn + ([""] if dp == root else []):
            p = os.path.join(dp, n) if n else dp
            st = os.lstat(p)
            t = t0 + zlib.crc32(first[(st.st_dev, st.st_ino)]) % 100000
            os.utime(p, (t, t), follow_symlinks=False)
    return 0


def main(a):
    cmd = a[0]
    if cmd == "writers":
        return writers(a[1], int(a[2]), "--serial" in a[3:])
    if cmd == "randwrite":
        return randwrite(a[1], a[2], int(a[3]))
    if cmd == "churn":
        return churn(a[1], a[2], int(a[3]))
    if cmd == "build":
        return build(a[1], int(a[2]), a[3])
    if cmd == "settle":
        return settle(a[1], int(a[2]))
    print(__doc__, file=sys.stderr)
    return 2


sys.exit(main(sys.argv[1:]))
