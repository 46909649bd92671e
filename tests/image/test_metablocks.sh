#!/bin/bash
# test_metablocks.sh SQFS_PACK
#
# Metadata blocks (inode and directory tables) are compressed as mksquashfs
# compresses them, without the tuning meant for data blocks:
#   xz    every block one LZMA2 filter, no BCJ (a filter that wins on an
#         inode block would make whole inodes unreadable to a kernel without
#         that decoder), 8 KiB dictionary; data blocks keep the asked one
#   lzma  8 KiB dictionary in each block's header; data: the block size
#   gzip  with `zlib,strategy=huffman`: each metadata block is what zlib's
#         default strategy makes at that level and window (Python's zlib,
#         the same library), each data block what Z_HUFFMAN_ONLY makes
# The tree has a symlink target of x86 CALLs, on which bcj=x86 wins; the
# kernel must mount the xz image and read that target and the file back.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

start_test "${1-}"
need_root
need_loop
[[ -x $PYTHON3 ]] || need_cmd python3

SRC=$WORK/src
mkdir -p "$SRC/d"
# A 200 KB text file: its first block is the image's first data block.
"$PYTHON3" - "$SRC" <<'EOF'
import sys, os
src = sys.argv[1]
words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"eta"]
with open(os.path.join(src, "a-text"), "wb") as f:
    n = 0
    while n < 200000:
        line = b" ".join(words[(n * 7 + i) % 7] for i in range(n % 11 + 1)) + b"\n"
        f.write(line)
        n += len(line)
# CALL rel32 with rel = K - (pos + 5): the x86 filter turns every one into
# the same absolute address, whatever the block offset.  K keeps the top
# byte 0xff (only then does the filter convert) and no byte zero.
t = bytearray()
K = 0xFFFEFEFF
while len(t) + 5 <= 4000:
    rel = (K - (len(t) + 5)) & 0xFFFFFFFF
    b = rel.to_bytes(4, "little")
    t += (b"\xe8" + b) if 0 not in b and 0x2f not in b else b"xxxxx"
os.symlink(bytes(t), os.path.join(src, "d", "calls"))
with open(os.path.join(src, "calls.target"), "wb") as f:
    f.write(bytes(t))
for i in range(300):
    open(os.path.join(src, "d", "entry-%04d-%s" % (i, "n" * (i % 40))), "w").close()
EOF
find "$SRC" -exec touch -h -d @1700000000 {} +

# check IMG CODEC: every metadata block of the inode and directory tables
# as described above; prints a line per kind of block it saw.
check() {
	"$PYTHON3" - "$@" <<'EOF'
import struct, sys, zlib
img, codec = sys.argv[1], sys.argv[2]
data = open(img, "rb").read()
(magic, inodes, mtime, bs, frags, comp, blog, flags, nids, major, minor,
 root, used, id_start, xattr_start, ino_start, dir_start, frag_start,
 exp_start) = struct.unpack_from("<IIIIIHHHHHHQQQQQQQQ", data, 0)
bad = []

def ends():
    # The directory table ends where the next table's first block starts.
    e = [used]
    for t in (frag_start, exp_start, id_start):
        if t != 0xFFFFFFFFFFFFFFFF and t < used:
            e.append(struct.unpack_from("<Q", data, t)[0])
    if xattr_start != 0xFFFFFFFFFFFFFFFF:
        e.append(struct.unpack_from("<Q", data, xattr_start)[0])
    return min(x for x in e if x > dir_start)

def blocks():
    for lo, hi in ((ino_start, dir_start), (dir_start, ends())):
        off = lo
        while off < hi:
            h = struct.unpack_from("<H", data, off)[0]
            n = h & 0x7FFF
            if not h & 0x8000:
                yield off, data[off + 2:off + 2 + n]
            off += 2 + n

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if not c & 0x80:
            return v, i

def xz_filters(b):
    assert b[:6] == b"\xfd7zXZ\x00", "not an xz stream"
    i = 12
    hsize = (b[i] + 1) * 4
    bf = b[i + 1]
    j = i + 2
    if bf & 0x40: _, j = varint(b, j)
    if bf & 0x80: _, j = varint(b, j)
    out = []
    for _ in range((bf & 3) + 1):
        fid, j = varint(b, j)
        psz, j = varint(b, j)
        out.append((fid, bytes(b[j:j + psz]))); j += psz
    assert j <= i + hsize
    return out

def lzma2_dict(p):
    return (2 | (p & 1)) << (p // 2 + 11)

# The kernel's xz decoder takes no stream with a larger dictionary than the
# options block gives (without one: the block size, at least 8 KiB).
announced = max(bs, 8192)
if codec == "xz" and flags & 0x400:
    announced = struct.unpack_from("<I", data, 98)[0]

seen = 0
for off, blk in blocks():
    seen += 1
    if codec == "xz":
        f = xz_filters(blk)
        if len(f) != 1 or f[0][0] != 0x21:
            bad.append("metadata block at %d: filters %s, want LZMA2 alone"
                       % (off, [hex(x) for x, _ in f]))
        elif lzma2_dict(f[0][1][0]) != 8192:
            bad.append("metadata block at %d: dictionary %d, want 8192"
                       % (off, lzma2_dict(f[0][1][0])))
        elif 8192 > announced:
            bad.append("metadata block at %d: dictionary 8192, more than the %d the "
                       "options block announces" % (off, announced))
    elif codec == "lzma":
        d = struct.unpack_from("<I", blk, 1)[0]
        if d != 8192:
            bad.append("metadata block at %d: dictionary %d, want 8192" % (off, d))
    elif codec == "gzip":
        raw = zlib.decompress(blk)
        c = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY)
        if c.compress(raw) + c.flush() != blk:
            bad.append("metadata block at %d: not zlib's default strategy" % off)
if not seen:
    bad.append("no compressed metadata block found")

# The first data block (the text file's first).
opt = 2 + struct.unpack_from("<H", data, 96)[0] & 0x7FFF if flags & 0x400 else 0
first = 96 + opt
if codec == "gzip":
    d = zlib.decompressobj()
    raw = d.decompress(data[first:first + 2 * bs])
    blk = data[first:first + 2 * bs][:len(data[first:first + 2 * bs]) - len(d.unused_data)]
    c = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_HUFFMAN_ONLY)
    if len(raw) != bs or c.compress(raw) + c.flush() != blk:
        bad.append("data block: not zlib's Z_HUFFMAN_ONLY, which was asked for")
elif codec == "xz":
    f = xz_filters(data[first:first + 64])
    if lzma2_dict(f[-1][1][0]) != bs:
        bad.append("data block: dictionary %d, want %d" % (lzma2_dict(f[-1][1][0]), bs))
    elif bs > announced:
        bad.append("data block: dictionary %d, more than the %d the options block "
                   "announces" % (bs, announced))
elif codec == "lzma":
    d = struct.unpack_from("<I", data, first + 1)[0]
    if d != bs:
        bad.append("data block: dictionary %d, want %d" % (d, bs))
for b in bad:
    print(b)
print("checked %d metadata blocks" % seen, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

for spec in "xz,bcj=x86" "lzma" "gzip:9,zlib,strategy=huffman"; do
	codec=${spec%%[:,]*}
	section "$spec"
	img=$WORK/$codec.sqfs
	"$SQFS_PACK" -q -c "$spec" --mkfs-time 1700000000 "$SRC" "$img"
	out=$(check "$img" "$codec") || fail "$spec: $out"
done
# At 4K blocks a filter (an options block) must still announce the 8 KiB
# dictionary of the metadata blocks: with 4K there, the kernel could not
# read a compressed inode or directory block (mksquashfs 4.5 writes 4K).
section "xz,bcj=x86 -b 4K"
"$SQFS_PACK" -q -c xz,bcj=x86 -b 4K --mkfs-time 1700000000 "$SRC" "$WORK/xz4k.sqfs"
out=$(check "$WORK/xz4k.sqfs" xz) || fail "xz,bcj=x86 -b 4K: $out"

# bcj=x86 must have won somewhere for the xz case to mean anything: on the
# data side a file of the same CALLs.
for img in xz xz4k; do
	section "$img: the kernel reads the CALLs back"
	mount_image "$WORK/$img.sqfs" "$WORK/m" || { fail "$img: kernel mount"; continue; }
	if [[ $(readlink -n "$WORK/m/d/calls" | od -An -tx1) != $(od -An -tx1 <"$SRC/calls.target") ]]; then
		fail "$img: the kernel reads another symlink target"
	fi
	cmp -s "$WORK/m/a-text" "$SRC/a-text" || fail "$img: the kernel reads another a-text"
	umount_quiet "$WORK/m"
done
# The same target as file data: bcj=x86 wins there (the image is smaller
# than without it), so the crafted CALLs do what the test needs.
mkdir -p "$WORK/data"
cp "$SRC/calls.target" "$WORK/data/f"
"$SQFS_PACK" -q -c xz --block-size 4K --no-pad --mkfs-time 1 "$WORK/data" "$WORK/plain.sqfs"
"$SQFS_PACK" -q -c xz,bcj=x86 --block-size 4K --no-pad --mkfs-time 1 "$WORK/data" "$WORK/bcj.sqfs"
p=$(stat -c %s "$WORK/plain.sqfs") b=$(stat -c %s "$WORK/bcj.sqfs")
((b < p)) || fail "bcj=x86 did not shrink the CALLs ($b against $p bytes): the test's input is not what it needs"
finish
