#!/usr/bin/env python3
"""regen.py RESULT.md...: re-print the tables of result files from their CSV
(after a change of stats.py, or after appending samples of another run of
the same machine and corpus to the CSV).  The header is kept."""
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
for md in sys.argv[1:]:
    m = re.match(r"(.*)-(pack|pipeline|fuse|scale|scaling)\.md$", md)
    if not m:
        sys.exit("regen.py: %s: not a DATE-HOST[-TAG]-MODE.md file" % md)
    text = open(md).read()
    head = text.split("### Results\n", 1)[0]
    tables = subprocess.run([sys.executable, os.path.join(here, "stats.py"), "report",
                             m.group(1) + ".csv", m.group(2)], check=True,
                            capture_output=True, text=True).stdout
    with open(md, "w") as f:
        f.write(head + "### Results\n\n" + tables)
