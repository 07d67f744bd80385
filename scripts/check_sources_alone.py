#!/usr/bin/env python3
"""Checks that every source file of the library compiles on its own.

CI builds the library in unity batches (ASIO_RDMA_FAST_BUILD), where a source that
forgets an include compiles anyway, on what the sources before it in its batch
included; a plain build (the default, a user's or a distribution's) then fails. Each
source of each batch is compiled here alone, with the batch's own command and
-fsyntax-only (no code generated: about 22 s for the library on two cores).

    scripts/check_sources_alone.py BUILD_DIR

It is the CTest test check_sources_alone (label unit) of a unity build, which exports
its compile commands. A build that is not a unity build compiles each source alone
already: then there is nothing to check, and it says so.
"""
import concurrent.futures, json, os, re, shlex, subprocess, sys


def batches(build_dir):
    """(command, directory, batch file, sources) of each of the library's unity batches."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        commands = json.load(f)
    for entry in commands:
        if not re.search(r"asio_rdma\.dir/Unity/unity_\d+_cxx\.cxx$", entry["file"]):
            continue
        with open(entry["file"]) as f:
            sources = re.findall(r'^#include "(.+\.cpp)"', f.read(), re.M)
        yield entry["command"], entry["directory"], entry["file"], sources


def alone(command, batch, source):
    """The batch's command, for `source` alone and without output."""
    args, skip = [], False
    for arg in shlex.split(command):
        if skip:
            skip = False
        elif arg in ("-o", "-MF", "-MT"):
            skip = True  # their file names are the batch's
        elif arg in ("-c", "-MD", "-MMD") or arg == batch:
            continue
        else:
            args.append(arg)
    return args + ["-fsyntax-only", source]


def main():
    build_dir = sys.argv[1]
    jobs = []
    for command, directory, batch, sources in batches(build_dir):
        jobs += [(alone(command, batch, s), directory, s) for s in sources]
    if not jobs:
        print("check_sources_alone: not a unity build: the build compiled every source alone")
        return 0
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = [(s, pool.submit(subprocess.run, a, cwd=d, capture_output=True, text=True))
                for a, d, s in jobs]
        for source, run in runs:
            result = run.result()
            if result.returncode != 0:
                failed += 1
                print(f"check_sources_alone: {source} does not compile on its own:")
                print(result.stderr)
    if failed:
        print(f"check_sources_alone: {failed} of {len(jobs)} sources need an include they lack")
        return 1
    print(f"check_sources_alone: each of {len(jobs)} sources compiles on its own")
    return 0


if __name__ == "__main__":
    sys.exit(main())
