#!/bin/bash
# mksrc.sh DIR: a source tree with every kind of entry SquashFS stores.
set -euo pipefail
D=$1
mkdir -p "$D"
cd "$D"
mkdir -p usr/bin usr/lib/deep/er/still etc empty tmp var/log
printf 'hello\n' > etc/hostname
: > etc/empty-file
head -c 4095 /dev/urandom > usr/lib/small.bin
head -c 131073 /dev/urandom > usr/lib/block-plus-one.bin
head -c 1048576 /dev/urandom > usr/bin/big.bin
seq 1 200000 > usr/lib/deep/er/still/numbers.txt
cp usr/lib/small.bin usr/lib/dup-of-small.bin
truncate -s 5M var/log/sparse.img
printf 'data in the middle' | dd of=var/log/sparse.img bs=1 seek=2097152 conv=notrunc status=none
ln usr/bin/big.bin usr/bin/big-hardlink
ln etc/hostname etc/hostname.2
ln -s ../etc/hostname usr/hostname-link
ln -s /nonexistent/absolute dangling
ln -s "$(printf 'x%.0s' {1..300})" long-target-link
mkfifo tmp/fifo
mknod dev-null c 1 3
mknod dev-loop b 7 0
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' tmp/sock
touch "$(printf 'n%.0s' {1..255})"
touch 'sp ace' 'ünïcödé' $'tab\there'
chmod 4755 usr/bin/big.bin
chmod 2750 usr/lib/deep
chmod 1777 tmp
chmod 0600 etc/hostname
chmod 0000 etc/empty-file
chown 1000:1000 usr/lib/small.bin
chown 65534:65533 var/log
chown -h 123:456 usr/hostname-link
setfattr -n user.comment -v 'a comment' etc/hostname
setfattr -n user.empty etc/empty-file 2>/dev/null || true
setfattr -n trusted.overlay.opaque -v y usr/lib
setfattr -n security.capability -v 0sAQAAAgAgAAAAAAAAAAAAAAAAAAA= usr/bin/big.bin
setfattr -n user.dir -v 1 .
find . -mindepth 1 -exec touch -h -d @1600000000 {} +
touch -h -d @1700000123 usr/bin/big.bin etc/hostname
touch -d @1500000000 .
