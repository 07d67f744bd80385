#!/usr/bin/python3
"""Checks what one rdma_fabric run left behind.

    check_output.py DIR RANKS EXIT_STATUS [--expect-flagged KIND] [--hosts N] [--no-png]

DIR holds fabric.json, fabric.png and table.txt (the run's stdout). Checks:
the JSON parses, has the parameters, RANKS ranks, RANKS x RANKS matrices
with an empty diagonal and every other cell measured (or failed, when a
flag says so), every measurement of the schedule; the verdict and the exit
status agree; the table shows the same verdict; the PNG is a real PNG of a
plausible size (unless --no-png). --expect-flagged KIND: at least one KIND (bandwidth, latency, any)
measurement must be flagged. --hosts N: the ranks must run on N distinct hosts.
"""
import json
import os
import struct
import sys


def fail(message):
    sys.exit("check_output: " + message)


def main():
    args = sys.argv[1:]
    no_png = "--no-png" in args  # the run drew no heatmap
    args = [a for a in args if a != "--no-png"]
    if len(args) < 3:
        fail("usage: check_output.py DIR RANKS EXIT_STATUS [--expect-flagged KIND] [--hosts N]")
    folder, ranks, status = args[0], int(args[1]), int(args[2])
    options = dict(zip(args[3::2], args[4::2]))
    with open(os.path.join(folder, "fabric.json")) as f:
        report = json.load(f)
    for key in ("size", "depth", "duration_s", "bandwidth_fraction", "latency_multiple",
                "bidirectional", "quick", "retest"):
        if key not in report["parameters"]:
            fail("parameter %s missing" % key)
    if len(report["ranks"]) != ranks:
        fail("%d ranks in the JSON, expected %d" % (len(report["ranks"]), ranks))
    hosts = {r["host"] for r in report["ranks"]}
    if "--hosts" in options and len(hosts) != int(options["--hosts"]):
        fail("ranks ran on %s, expected %s hosts" % (sorted(hosts), options["--hosts"]))
    failed = {(m["kind"], m["from"], m["to"]) for m in report["measurements"]
              if "error" in m and not m["retest"]}
    bidirectional = report["parameters"]["bidirectional"]
    for name in ("bandwidth_gbps", "latency_us"):
        matrix = report[name]
        if len(matrix) != ranks or any(len(row) != ranks for row in matrix):
            fail("%s is not %d x %d" % (name, ranks, ranks))
        for i in range(ranks):
            for j in range(ranks):
                v = matrix[i][j]
                if i == j:
                    if v is not None:
                        fail("%s[%d][%d] (the diagonal) is %r" % (name, i, j, v))
                    continue
                if v is None:
                    kind = "bandwidth" if name == "bandwidth_gbps" else "latency"
                    keys = {(kind, i, j), (kind, j, i)}
                    if not keys & failed:
                        fail("%s[%d][%d] is empty but no measurement failed" % (name, i, j))
                elif not v > 0:
                    fail("%s[%d][%d] is %r" % (name, i, j, v))
    first = [m for m in report["measurements"] if not m["retest"]]
    pairs = ranks * (ranks - 1) // 2
    expected = pairs * (2 if bidirectional else 3)
    if len(first) != expected:
        fail("%d first measurements, the schedule has %d" % (len(first), expected))
    for m in first:
        if "error" not in m and m["iterations"] <= 0:
            fail("a measurement without iterations: %r" % m)
    flagged = report["flagged"]
    if (report["verdict"] == "flagged") != bool(flagged):
        fail("verdict %r with %d flags" % (report["verdict"], len(flagged)))
    if status != (1 if flagged else 0):
        fail("exit status %d, but %d measurement(s) flagged" % (status, len(flagged)))
    retests = [m for m in report["measurements"] if m["retest"]]
    if report["parameters"]["retest"] and len(retests) != len(flagged):
        fail("%d flagged but %d retests" % (len(flagged), len(retests)))
    if "--expect-flagged" in options:
        kind = options["--expect-flagged"]
        if not any(kind in ("any", f["kind"]) for f in flagged):
            fail("no %s measurement flagged: %r" % (kind, flagged))
    with open(os.path.join(folder, "table.txt")) as f:
        table = f.read()
    if "bandwidth Gb/s" not in table or "latency us" not in table:
        fail("the table lacks a matrix:\n" + table)
    verdict_line = "verdict: all pairs within thresholds" if not flagged else \
        "verdict: %d measurement(s) flagged" % len(flagged)
    if verdict_line not in table:
        fail("the table does not say %r:\n%s" % (verdict_line, table))
    png_note = "no PNG asked for"
    if not no_png:
        with open(os.path.join(folder, "fabric.png"), "rb") as f:
            png = f.read()
        if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
            fail("fabric.png is not a PNG")
        width, height = struct.unpack(">II", png[16:24])
        if width < 200 or height < 100 or len(png) < 5000:
            fail("fabric.png is implausibly small: %dx%d, %d bytes" % (width, height, len(png)))
        png_note = "%dx%d PNG ok" % (width, height)
    print("check_output: %d ranks on %d host(s), %d measurements, %d flagged, %s" %
          (ranks, len(hosts), len(report["measurements"]), len(flagged), png_note))


if __name__ == "__main__":
    main()
