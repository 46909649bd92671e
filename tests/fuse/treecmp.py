#!/usr/bin/env python3
"""treecmp.py A B: compare two trees as SquashFS can store them.

Entries, types, mode bits, uid, gid, mtime (seconds), rdev, sizes, file
contents, symlink targets, hard-link groups and xattrs (user., trusted.,
security.).  The roots' attributes are compared too.  Exit 0 if equal."""
import errno
import os
import stat
import sys


def xattrs(p):
    try:
        names = os.listxattr(p, follow_symlinks=False)
    except OSError as e:
        # a file system without xattrs has none; any other error is one
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise
    out = {}
    for n in names:
        if n.startswith(("user.", "trusted.", "security.")):
            out[n] = os.getxattr(p, n, follow_symlinks=False)
    return out


def walk_error(e):
    raise e


def scan(root):
    ents = {}
    links = {}
    # a missing or unreadable tree is an error, not an empty tree
    if not os.path.isdir(root):
        sys.exit("treecmp: %s: not a directory" % root)
    for dirpath, dirnames, filenames in os.walk(root, onerror=walk_error):
        for name in [""] + dirnames + filenames if dirpath == root else dirnames + filenames:
            p = os.path.join(dirpath, name) if name else root
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            e = {
                "type": stat.S_IFMT(st.st_mode),
                "mode": stat.S_IMODE(st.st_mode),
                "uid": st.st_uid,
                "gid": st.st_gid,
                "mtime": int(st.st_mtime),
                "xattrs": xattrs(p),
            }
            if stat.S_ISREG(st.st_mode):
                e["size"] = st.st_size
                with open(p, "rb") as f:
                    import hashlib
                    h = hashlib.sha256()
                    for b in iter(lambda: f.read(1 << 20), b""):
                        h.update(b)
                    e["sha"] = h.hexdigest()
                if st.st_nlink > 1:
                    links.setdefault((st.st_dev, st.st_ino), []).append(rel)
            elif stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                e["rdev"] = (os.major(st.st_rdev), os.minor(st.st_rdev))
            if not stat.S_ISDIR(st.st_mode):
                e["nlink"] = st.st_nlink
            ents[rel] = e
    groups = sorted(sorted(g) for g in links.values())
    return ents, groups


def main():
    a, ga = scan(sys.argv[1])
    b, gb = scan(sys.argv[2])
    bad = 0
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            print(f"only in {'B' if k in b else 'A'}: {k}")
            bad += 1
        elif a[k] != b[k]:
            diff = {f: (a[k].get(f), b[k].get(f)) for f in set(a[k]) | set(b[k])
                    if a[k].get(f) != b[k].get(f)}
            print(f"differs: {k}: {diff}")
            bad += 1
        if bad > 20:
            break
    if ga != gb:
        print(f"hard-link groups differ: {ga} vs {gb}")
        bad += 1
    sys.exit(1 if bad else 0)


main()
