#!/usr/bin/env python3
"""Summarizes a `perf record --call-graph dwarf` profile of the connector.

    perf script -i /tmp/snap.perf -F comm,tid,time,period,ip,sym,dso > /tmp/snap.txt
    scripts/perf-summary.py /tmp/snap.txt [--hz 499] [--top 40]

Prints the samples by thread, by role (what the innermost frame of ours on
the stack says the thread was doing: the snapshot's readers, its emitter,
the stream, librdkafka), by function (self: the leaf frame; total: anywhere
on the stack), and per second each role's share of a core (samples / hz),
which shows whether one of them is saturated.
"""

import argparse
import collections
import re
import sys

# Innermost match wins: the frames are read leaf first.
ROLES = [
    ("reader (COPY rows)", re.compile(r"snapshot::emission::read_chunk|source::snapshot::copy_select|parse_copy_line|tokio_postgres")),
    ("emitter: decode", re.compile(r"decode_read_row|relation::.*decode|source::types|unmapped_key")),
    ("emitter: encode", re.compile(r"pgcdc_kafka::encode::")),
    ("emitter: produce", re.compile(r"sink::kafka::KafkaSink::produce|rd_kafka_producev|sink::at_least_once")),
    ("emitter: other", re.compile(r"snapshot::emission::Emission|snapshot::emit_snapshot|stream::events|Stream::send_event")),
]


def roles_of(comm, frames):
    """The role of a sample: the first of our frames (leaf first) that names one."""
    if comm.startswith("rdk:broker"):
        return "librdkafka broker thread"
    if comm.startswith("rdk:"):
        return "librdkafka " + comm
    if comm.startswith("producer"):
        return "librdkafka delivery reports (polling thread)"
    for sym in frames:
        for role, pattern in ROLES:
            if pattern.search(sym):
                return role
    if comm.startswith("tokio"):
        return "tokio worker, other"
    return comm


def parse(lines):
    header = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+\.\d+):\s+(\d+)\s")
    sample = None
    for line in lines:
        if not line.strip():
            if sample:
                yield sample
            sample = None
            continue
        if not line[0].isspace():
            if sample:
                yield sample
            m = header.match(line)
            sample = None
            if m:
                sample = {
                    "comm": m.group(1),
                    "tid": int(m.group(2)),
                    "time": float(m.group(3)),
                    "period": int(m.group(4)),
                    "frames": [],
                }
            continue
        if sample is not None:
            parts = line.strip().split(None, 1)
            sym = parts[1] if len(parts) > 1 else "?"
            sym = re.sub(r"\+0x[0-9a-f]+", "", sym)
            sample["frames"].append(sym)
    if sample:
        yield sample


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--hz", type=float, default=499)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    threads = collections.Counter()
    roles = collections.Counter()
    self_fn = collections.Counter()
    total_fn = collections.Counter()
    per_second = collections.defaultdict(collections.Counter)
    n = 0
    t0 = None
    with open(args.script, errors="replace") as f:
        for s in parse(f):
            n += 1
            t0 = s["time"] if t0 is None else t0
            frames = s["frames"] or ["?"]
            threads[s["comm"]] += 1
            role = roles_of(s["comm"], frames)
            roles[role] += 1
            self_fn[frames[0]] += 1
            for sym in set(frames):
                total_fn[sym] += 1
            per_second[int(s["time"] - t0)][role] += 1
    if not n:
        sys.exit("no samples")
    pct = lambda c: f"{100.0 * c / n:5.1f}%"
    print(f"{n} samples, {n / args.hz:.2f} CPU s at {args.hz:g} Hz\n\nby thread:")
    for k, c in threads.most_common():
        print(f"  {pct(c)}  {k}")
    print("\nby role:")
    for k, c in roles.most_common():
        print(f"  {pct(c)}  {k}")
    print("\nby function, self:")
    for k, c in self_fn.most_common(args.top):
        print(f"  {pct(c)}  {k[:150]}")
    print("\nby function, total (anywhere on the stack):")
    for k, c in total_fn.most_common(args.top):
        print(f"  {pct(c)}  {k[:150]}")
    names = [k for k, _ in roles.most_common(8)]
    print("\nshare of a core per second, by role:")
    print("  s   all   " + "  ".join(f"{k[:14]:>14}" for k in names))
    for sec in sorted(per_second):
        row = per_second[sec]
        cells = "  ".join(f"{row[k] / args.hz:14.2f}" for k in names)
        print(f"  {sec:<3} {sum(row.values()) / args.hz:4.2f}  {cells}")


if __name__ == "__main__":
    main()
