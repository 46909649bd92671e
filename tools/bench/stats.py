#!/usr/bin/env python3
"""stats.py: the benchmark's bookkeeping.

  stats.py record CSV SAMPLE_DIR key=value...
      Append one row (one sample = one tool, one case, one repetition) to the
      raw CSV.  Every SAMPLE_DIR/NAME.time file (GNU time: "wall user sys
      maxrss_kb", as tools/bench/tm.sh writes it) is one process: user_s and
      sys_s are their sums, cpu_s = user_s + sys_s, rss_max_kb their maximum,
      and procs lists each (NAME=wall/user/sys/maxrss_kb;...).  key=value
      sets a column (date host mode corpus case comp jobs tool rep wall_s
      image_bytes cmd); other keys go into the extra column (k=v;k=v).
  stats.py report CSV MODE
      Markdown tables of medians for MODE from the raw CSV on stdout.
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

COLS = ["date", "host", "mode", "corpus", "case", "comp", "jobs", "tool", "rep",
        "wall_s", "user_s", "sys_s", "cpu_s", "rss_max_kb", "image_bytes", "extra",
        "procs", "cmd"]


def record(path, sdir, kvs):
    row = dict.fromkeys(COLS, "")
    extra = []
    for kv in kvs:
        k, v = kv.split("=", 1)
        if k in COLS:
            row[k] = v
        else:
            extra.append("%s=%s" % (k, v))
    user = sys_ = 0.0
    rss = 0
    procs = []
    for name in sorted(os.listdir(sdir)):
        if not name.endswith(".time"):
            continue
        with open(os.path.join(sdir, name)) as f:
            lines = [l.split() for l in f if l.strip()]
        w, u, s, m = lines[-1][:4]
        user += float(u)
        sys_ += float(s)
        rss = max(rss, int(m))
        procs.append("%s=%s/%s/%s/%s" % (name[:-5], w, u, s, m))
    row.update(user_s="%.2f" % user, sys_s="%.2f" % sys_, cpu_s="%.2f" % (user + sys_),
               rss_max_kb=str(rss), procs=";".join(procs), extra=";".join(extra))
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, COLS)
        if new:
            w.writeheader()
        w.writerow(row)


def load(path, mode):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["mode"] != mode:
                continue
            for kv in filter(None, r["extra"].split(";")):
                k, v = kv.split("=", 1)
                r[k] = v
            rows.append(r)
    return rows


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class Groups:
    """Medians of a metric per (case, comp, jobs, tool), and the spread."""

    def __init__(self, rows):
        self.g = defaultdict(list)
        for r in rows:
            self.g[(r["case"], r["comp"], r["jobs"], r["tool"])].append(r)
        self.spread = 0.0
        self.nreps = sorted({len(v) for v in self.g.values()})

    def med(self, key, metric):
        vals = [num(r.get(metric)) for r in self.g.get(key, [])]
        vals = [v for v in vals if v is not None]
        if not vals:
            return None
        m = statistics.median(vals)
        if m > 0 and len(vals) > 1 and metric in ("wall_s", "cpu_s"):
            self.spread = max(self.spread, (max(vals) - min(vals)) / m)
        return m

    def cases(self):
        seen = []
        for k in self.g:
            if k[:3] not in seen:
                seen.append(k[:3])
        return seen


def fmt(v, metric):
    if v is None:
        return "–"
    if metric.endswith("_kb"):
        return "%.0f MiB" % (v / 1024)
    if metric.endswith("bytes"):
        return "{:,}".format(int(v)).replace(",", " ")
    if metric.endswith("_s"):
        return "%.2f s" % v if v < 100 else "%.1f s" % v
    return "%g" % v


def ratio(a, b, digits=2):
    if a is None or b is None or b == 0:
        return "–"
    return "%.*f" % (digits, a / b)


METRICS = [("wall_s", "Wall time"), ("cpu_s", "CPU time (user+sys, every process)"),
           ("rss_max_kb", "Peak RSS (largest process)"), ("image_bytes", "Image file size (bytes)"),
           ("fs_bytes", "Filesystem size: superblock bytes_used, before padding (bytes)")]


def table(G, tools, pairs, metric, title, out, case_col=True):
    hdr = (["case"] if case_col else []) + ["comp", "jobs"] + tools + \
          ["%s/%s" % p for p in pairs]
    out.append("#### %s\n" % title)
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "---|" * len(hdr))
    for case, comp, jobs in G.cases():
        vals = {t: G.med((case, comp, jobs, t), metric) for t in tools}
        cells = ([case] if case_col else []) + [comp, jobs] + [fmt(vals[t], metric) for t in tools] + \
                [ratio(vals[a], vals[b], 4 if metric.endswith("bytes") else 2) for a, b in pairs]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")


def report(path, mode):
    rows = load(path, mode)
    if not rows:
        print("(no samples)\n")
        return
    G = Groups(rows)
    out = []
    tools_present = []
    for r in rows:
        if r["tool"] not in tools_present:
            tools_present.append(r["tool"])
    if mode == "pack":
        tools = [t for t in ["sqfs-pack", "mksquashfs", "gensquashfs", "sqfs-pack-tar", "tar2sqfs"]
                 if t in tools_present]
        pairs = [p for p in [("sqfs-pack", "mksquashfs"), ("sqfs-pack", "gensquashfs"),
                             ("sqfs-pack-tar", "tar2sqfs")] if p[0] in tools and p[1] in tools]
        for m, t in METRICS:
            table(G, tools, pairs, m, t, out, case_col=False)
    elif mode == "pipeline":
        tools = [t for t in ["stage", "tmpfs+mksquashfs", "stream+tar2sqfs", "stream+sqfs-pack"]
                 if t in tools_present]
        pairs = [p for p in [("stage", "tmpfs+mksquashfs"), ("stage", "stream+tar2sqfs"),
                             ("stream+sqfs-pack", "stream+tar2sqfs")] if p[0] in tools and p[1] in tools]
        for m, t in [("wall_s", "Total wall time (producer start → image complete)"),
                     ("seal_s", "Seal latency (producer exit → image complete)")] + METRICS[1:]:
            table(G, tools, pairs, m, t, out)
        out.append("#### sqfs-stage: producer, daemon and compression backlog\n")
        out.append("| case | comp | jobs | producer wall | seal latency | teardown | daemon CPU | daemon peak RSS "
                   "| backlog max (bytes) | backlog at producer exit (bytes / files) "
                   "| fragment blocks the seal compressed / all |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for case, comp, jobs in G.cases():
            k = (case, comp, jobs, "stage")
            if k not in G.g:
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |" % (
                case, comp, jobs, fmt(G.med(k, "producer_s"), "_s"), fmt(G.med(k, "seal_s"), "_s"),
                fmt(G.med(k, "teardown_s"), "_s"), fmt(G.med(k, "daemon_cpu_s"), "_s"), fmt(G.med(k, "daemon_hwm_kb"), "_kb"),
                fmt(G.med(k, "backlog_max_bytes"), "bytes"), fmt(G.med(k, "backlog_exit_bytes"), "bytes"),
                fmt(G.med(k, "backlog_exit_files"), ""), fmt(G.med(k, "seal_frags"), ""),
                fmt(G.med(k, "frags"), "")))
        out.append("")
    elif mode == "fuse":
        tools = [t for t in ["mount", "tmpfs"] if t in tools_present]
        pairs = [("mount", "tmpfs")] if len(tools) == 2 else []
        table(G, tools, pairs, "wall_s", "Write phase wall time (producer start → exit)", out)
        table(G, tools, pairs, "cpu_s", "Write phase CPU (producer processes + daemon until producer exit)", out)
        table(G, tools, pairs, "rss_max_kb", "Peak RSS (largest process; daemon's VmHWM at producer exit)", out)
        out.append("#### After the write: sealing the mount\n")
        out.append("| case | comp | jobs | seal latency | teardown | daemon CPU total | daemon peak RSS total "
                   "| image size |")
        out.append("|---|---|---|---|---|---|---|---|")
        for case, comp, jobs in G.cases():
            k = (case, comp, jobs, "mount")
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                case, comp, jobs, fmt(G.med(k, "seal_s"), "_s"), fmt(G.med(k, "teardown_s"), "_s"),
                fmt(G.med(k, "daemon_cpu_s"), "_s"),
                fmt(G.med(k, "daemon_hwm_kb"), "_kb"), fmt(G.med(k, "image_bytes"), "bytes")))
        out.append("")
    elif mode == "scale":
        out.append("| case | comp | jobs | size | write wall | daemon VmRSS during write: first / max / last "
                   "sample | daemon VmHWM at producer exit | seal latency | teardown | daemon peak RSS (whole run) "
                   "| daemon CPU | image size |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for case, comp, jobs in G.cases():
            k = (case, comp, jobs, "stage")
            out.append("| %s | %s | %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s |" % (
                case, comp, jobs, G.g[k][0].get("size", ""), fmt(G.med(k, "producer_s"), "_s"),
                fmt(G.med(k, "rss_first_kb"), "_kb"), fmt(G.med(k, "rss_maxw_kb"), "_kb"),
                fmt(G.med(k, "rss_last_kb"), "_kb"), fmt(G.med(k, "hwm_exit_kb"), "_kb"),
                fmt(G.med(k, "seal_s"), "_s"), fmt(G.med(k, "teardown_s"), "_s"),
                fmt(G.med(k, "daemon_hwm_kb"), "_kb"),
                fmt(G.med(k, "daemon_cpu_s"), "_s"), fmt(G.med(k, "image_bytes"), "bytes")))
        out.append("")
    elif mode == "scaling":
        tools = [t for t in ["sqfs-pack", "mksquashfs"] if t in tools_present]
        comps = []
        for _, comp, _ in G.cases():
            if comp not in comps:
                comps.append(comp)
        for comp in comps:
            jobs = sorted({int(j) for _, c, j in G.cases() if c == comp})
            out.append("#### %s\n" % comp)
            hdr = ["jobs"]
            for t in tools:
                hdr += ["%s wall" % t, "speed-up", "efficiency", "CPU"]
            if len(tools) == 2:
                hdr += ["wall %s/%s" % tuple(tools)]
            out.append("| " + " | ".join(hdr) + " |")
            out.append("|" + "---|" * len(hdr))
            for j in jobs:
                cells = [str(j)]
                walls = []
                for t in tools:
                    w = G.med(("scaling", comp, str(j), t), "wall_s")
                    w1 = G.med(("scaling", comp, str(jobs[0]), t), "wall_s")
                    walls.append(w)
                    sp = w1 * jobs[0] / w if w and w1 else None
                    cells += [fmt(w, "_s"), "%.2f" % sp if sp else "–", "%.0f %%" % (100 * sp / j) if sp else "–",
                              fmt(G.med(("scaling", comp, str(j), t), "cpu_s"), "_s")]
                if len(tools) == 2:
                    cells.append(ratio(*walls))
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        out.append("Speed-up = wall(j0) × j0 / wall(jobs), j0 = the smallest jobs value measured (normally 1, "
                   "so speed-up = wall(1) / wall(jobs)); efficiency = speed-up / jobs.")
        out.append("")
    out.append("Each cell: median of %s repetition(s); largest spread (max−min)/median of a wall or CPU "
               "cell in this mode: %.0f %%. Raw samples: the CSV beside this file." %
               ("/".join(map(str, G.nreps)), 100 * G.spread))
    out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "record":
        record(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
