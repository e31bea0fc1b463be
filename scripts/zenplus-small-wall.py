#!/usr/bin/env python3
"""Sum the measured wall time of every Zen+ Fig. 8-31 run recorded at `small` scale.

Usage: python3 scripts/zenplus-small-wall.py [docs/reproduction]

Reads every DIR/*/results.json under the given directory (default docs/reproduction) whose
figure is zenplus-fig08 .. zenplus-fig31 and whose scale is `small`. A run is identified by its
arguments and repetition: a run a figure took from another figure of the same invocation
(`shared_from`) is not counted, and a run made again by a later invocation (the same arguments
and repetition in another directory) is counted once, with the wall time of the latest
invocation (`finished_utc`). `wall_s` is the last try's time, as `results.json` records it.
"""

import glob
import json
import os
import sys


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else "docs/reproduction"
    runs = {}  # (args, rep) -> (finished_utc, wall_s, figure, dir)
    records = 0
    shared = 0
    figures = set()
    for path in sorted(glob.glob(os.path.join(root, "*", "*", "results.json"))):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        fig = doc["figure"]["id"]
        if doc.get("scale") != "small" or not fig.startswith("zenplus-fig"):
            continue
        if not 8 <= int(fig[len("zenplus-fig"):]) <= 31:
            continue
        figures.add(fig)
        finished = doc.get("finished_utc") or ""
        for run in doc["runs"]:
            records += 1
            if run.get("shared_from"):
                shared += 1
                continue
            if run.get("wall_s") is None:
                continue
            key = (tuple(run["args"]), run["rep"])
            seen = runs.get(key)
            if seen is None or finished > seen[0]:
                runs[key] = (finished, run["wall_s"], fig, os.path.dirname(path))
    per_fig = {}
    for _, wall, fig, _ in runs.values():
        n, s = per_fig.get(fig, (0, 0.0))
        per_fig[fig] = (n + 1, s + wall)
    total = sum(w for _, w, _, _ in runs.values())
    for fig in sorted(per_fig):
        n, s = per_fig[fig]
        print(f"{fig:16} {n:4} runs {s:9.1f} s")
    print(
        f"figures: {', '.join(sorted(figures))}\n"
        f"{records} records, {shared} shared within an invocation, "
        f"{records - shared - len(runs)} made again by a later invocation; "
        f"{len(runs)} distinct runs, wall_s {total:.1f} s = {total / 60:.1f} min"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
