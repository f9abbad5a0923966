#!/usr/bin/env python3
"""Medians per variant of a `scripts/bench-ab.sh` run of workload (s).

    scripts/bench-ab-medians.py [target/bench/results.json] [--every-rounds 1]

bench-ab.sh switches variant every BENCH_AB_EVERY connector starts; with
`--workloads s --avro` and BENCH_AB_EVERY=2 that is every round (JSON and
Avro of a round run as the same variant), rounds 1, 3, ... as A. Prints each
round (the connector's CPU per row, its ratio to Kafka alone, the load
average at its end) and the medians per variant and format.
"""

import argparse
import json
import statistics

FIGURES = [
    ("connector_us_per_row", "connector µs/row"),
    ("ratio_to_kafka_alone", "ratio to Kafka alone"),
    ("connector_s", "connector s"),
    ("kafka_alone_s", "Kafka alone s"),
    ("broker_us_per_row", "broker µs/row"),
    ("kafka_alone_producer_us_per_row", "Kafka alone producer µs/row"),
    ("load_average_1m", "load"),
    ("connector_peak_rss_mb", "peak RSS MB"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?", default="target/bench/results.json")
    ap.add_argument("--every-rounds", type=int, default=1,
                    help="rounds per variant before switching (1: A, B, A, ...)")
    args = ap.parse_args()
    results = [r for r in json.load(open(args.results))["results"] if "copy_s" in r]
    groups = {}
    print("| round | variant | format | " + " | ".join(label for _, label in FIGURES) + " |")
    print("|---:|---|---|" + "---:|" * len(FIGURES))
    for r in results:
        variant = "AB"[((r["round"] - 1) // args.every_rounds) % 2]
        groups.setdefault((variant, r["format"]), []).append(r)
        cells = " | ".join(str(r.get(key)) for key, _ in FIGURES)
        print(f"| {r['round']} | {variant} | {r['format']} | {cells} |")
    print("\nmedians:\n")
    print("| variant | format | rounds | " + " | ".join(label for _, label in FIGURES) + " |")
    print("|---|---|---:|" + "---:|" * len(FIGURES))
    for (variant, fmt), runs in sorted(groups.items(), key=lambda g: (g[0][1], g[0][0])):
        cells = []
        for key, _ in FIGURES:
            values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
            cells.append(f"{statistics.median(values):.2f}" if values else "n/a")
        print(f"| {variant} | {fmt} | {len(runs)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
