#!/usr/bin/env python3
"""sampler.py PID MNT OUT.csv [INTERVAL]: every INTERVAL seconds (0.5) until
PID exits, append one CSV row to OUT.csv:
  t (seconds since start), vmrss_kb, vmhwm_kb, cpu_s (utime+stime of PID,
  all threads), then from the root xattr user.sqfs-stage.status of MNT (the
  JSON that `getfattr -n user.sqfs-stage.status --only-values MNT` prints):
  queued_files, queued_bytes, busy, stored_blocks (empty once unreadable,
  e.g. while sealing or after the unmount).

Before sealing, run.sh creates OUT.csv.noxattr and waits for OUT.csv.ack:
from then on only /proc is read.  (A getxattr in flight on the mount, e.g.
one that waits for the seal to finish, would make the unmount that
ends sqfs-seal fail with EBUSY.)"""
import json
import os
import sys
import time

pid, mnt, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
interval = float(sys.argv[4]) if len(sys.argv) > 4 else 0.5
tck = os.sysconf("SC_CLK_TCK")
t0 = time.monotonic()
stopped = False
with open(out, "a") as f:
    f.write("t,vmrss_kb,vmhwm_kb,cpu_s,queued_files,queued_bytes,busy,stored_blocks\n")
    while True:
        try:
            with open("/proc/%d/status" % pid) as s:
                st = dict(l.split(":", 1) for l in s if ":" in l)
            with open("/proc/%d/stat" % pid) as s:
                fields = s.read().rsplit(")", 1)[1].split()
            rss = st["VmRSS"].split()[0]
            hwm = st["VmHWM"].split()[0]
            cpu = (int(fields[11]) + int(fields[12])) / tck
        except (OSError, KeyError, IndexError):
            break
        q = ["", "", "", ""]
        if not stopped and os.path.exists(out + ".noxattr"):
            stopped = True
            open(out + ".ack", "w").close()
        if not stopped:
            try:
                j = json.loads(os.getxattr(mnt, "user.sqfs-stage.status"))
                q = [j.get("queued_files", ""), j.get("queued_bytes", ""), j.get("busy", ""),
                     j.get("stored_blocks", "")]
            except (OSError, ValueError):
                pass
        f.write("%.2f,%s,%s,%.2f,%s,%s,%s,%s\n" % (time.monotonic() - t0, rss, hwm, cpu, *q))
        f.flush()
        # Sleep in small steps so that a stop request is answered at once.
        until = time.monotonic() + interval
        while time.monotonic() < until:
            if not stopped and os.path.exists(out + ".noxattr"):
                stopped = True
                open(out + ".ack", "w").close()
            time.sleep(0.01)
