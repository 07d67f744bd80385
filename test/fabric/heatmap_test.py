#!/usr/bin/python3
"""fabric_heatmap on a real report of a failing fabric, on this machine.

    heatmap_test.py FABRIC_HEATMAP

data/two_hosts_cut.json is step 1 of two_hosts.sh as one run left it
(FABRIC_TEST_KEEP): the cable cut while round 1 measured, so bandwidth
0 -> 3 and 1 -> 2 failed (null in the matrix) and were flagged. The guests
draw no heatmap there (matplotlib takes minutes in two TCG guests); here it
takes seconds. Against the same report with the failed pairs measured and
nothing flagged: the failed cells are grey (matplotlib's "bad" colour,
#dddddd, as the unmeasured diagonal) and the flagged ones outlined in red,
what a reader of the heatmap of a failing fabric is shown.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402


BAD, RED = (0xdd, 0xdd, 0xdd), (0xff, 0, 0)


def count(pixels, rgb):
    target = [c / 255 for c in rgb]
    return sum(1 for row in pixels for p in row
               if all(abs(p[i] - target[i]) < 0.02 for i in range(3)))


def draw(script, report, tmp, name):
    """The pixels of fabric_heatmap's PNG of `report` (a dict)."""
    source, png = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".png")
    with open(source, "w") as f:
        json.dump(report, f)
    subprocess.run([script, source, png], check=True, env=dict(os.environ, MPLCONFIGDIR=tmp))
    with open(png, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            sys.exit("FAIL: %s is not a PNG" % name)
    return matplotlib.image.imread(png)


def main():
    script = sys.argv[1]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                           "two_hosts_cut.json")) as f:
        cut = json.load(f)
    # The same fabric had the cable stayed in: the failed pairs measured (at the
    # crossing pairs' rate), nothing flagged.
    whole = copy.deepcopy(cut)
    failed = [(i, j) for i, row in enumerate(cut["bandwidth_gbps"])
              for j, v in enumerate(row) if v is None and i != j]
    for i, j in failed:
        whole["bandwidth_gbps"][i][j] = 0.16
    whole["flagged"] = []
    if len(failed) != 2 or len(cut["flagged"]) != 2:
        sys.exit("FAIL: the report is not the one described above")
    with tempfile.TemporaryDirectory() as tmp:
        cut_pixels, whole_pixels = draw(script, cut, tmp, "cut"), draw(script, whole, tmp, "whole")
    height, width = len(cut_pixels), len(cut_pixels[0])
    grey = count(cut_pixels, BAD) - count(whole_pixels, BAD)
    red = count(cut_pixels, RED) - count(whole_pixels, RED)
    print("%dx%d PNG; the cut report has %d more grey (failed) and %d more red (flagged)"
          " pixels than the whole one" % (width, height, grey, red))
    if width < 600 or height < 300:
        sys.exit("FAIL: implausibly small")
    # A cell is about 80x80 pixels at dpi 60 (the diagonal is grey in both).
    if grey < 2 * 2000:
        sys.exit("FAIL: the two failed measurements are not drawn as failed cells")
    if red < 2 * 100:
        sys.exit("FAIL: the two flagged pairs are not outlined in red")
    print("PASS")


if __name__ == "__main__":
    main()
