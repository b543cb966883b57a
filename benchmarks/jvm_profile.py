"""Where the JVM's task threads spend their time: the hot methods of a Java Flight Recording.

Record a benchmark's driver JVM (in ``local`` mode it runs the tasks too) with the JDK's
own profiler, then read the recording's execution samples of Spark's task threads::

    JDK_JAVA_OPTIONS="-XX:StartFlightRecording=filename=/tmp/jfr/,settings=profile" \\
        .venv/bin/python -m benchmarks.run --batches 10 --repeats 1 --contenders icesink-none
    .venv/bin/python -m benchmarks.jvm_profile /tmp/jfr/<the largest .jfr> --since 09:28:11 --until 09:28:43

(``JDK_JAVA_OPTIONS`` reaches every JVM started meanwhile; the driver's recording is the
largest.) Pass the timed run's window (the benchmark prints its runs' lengths) to leave
out the warm-up. Prints, as shares of the task threads' samples, the methods on top of
the stack (self) and the methods anywhere on it (inclusive; stacks are cut at the
recording's depth, 64 frames, so callers far down are undercounted).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import Counter
from typing import Any

TASK_THREAD = "Executor task launch worker"


def samples(path: str, since: str, until: str) -> list[list[str]]:
    """The stacks (top frame first) of the task threads' execution samples between two UTC times."""
    command = ["jfr", "print", "--json", "--events", "jdk.ExecutionSample", path]
    events = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    stacks = []
    for event in events["recording"]["events"]:
        values: dict[str, Any] = event["values"]
        moment = values["startTime"][11:19]  # HH:MM:SS of an ISO time
        thread = values["sampledThread"]["javaName"] or ""
        if not (since <= moment <= until) or not thread.startswith(TASK_THREAD):
            continue
        frames = (values["stackTrace"] or {}).get("frames", [])
        stacks.append([f"{f['method']['type']['name']}.{f['method']['name']}" for f in frames])
    return stacks


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("recording")
    parser.add_argument("--since", default="00:00:00", help="UTC, HH:MM:SS")
    parser.add_argument("--until", default="99:99:99", help="UTC, HH:MM:SS")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    stacks = samples(args.recording, args.since, args.until)
    top = Counter(stack[0] for stack in stacks if stack)
    anywhere = Counter(method for stack in stacks for method in set(stack))
    print(f"{len(stacks)} samples of the task threads")
    for title, counts in (("self", top), ("inclusive", anywhere)):
        print(f"\n| {title} | share |\n|---|---|")
        for method, n in counts.most_common(args.top):
            print(f"| `{method.replace('/', '.')}` | {n / max(1, len(stacks)):.0%} |")


if __name__ == "__main__":
    main()
