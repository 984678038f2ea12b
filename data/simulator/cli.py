"""Command line: ``python -m data.simulator --out DIR [--users N ...]``.

Writes the four files into ``--out`` and prints ``simulate``'s result (paths and
measured marginals) as JSON. Example::

    python -m data.simulator --out data/generated/sim --users 300 --videos 400 \\
        --days 6 --seed 7
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from data.simulator.simulation import simulate


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m data.simulator",
        description="Write simulated KuaiRand-Pure-format logs (+ truth) into --out.")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--videos", type=int, default=400)
    parser.add_argument("--days", type=int, default=6)
    parser.add_argument("--impressions-per-user-day", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start-date", default="2022-04-25")
    args = parser.parse_args(argv)
    result = simulate(args.out, num_users=args.users, num_videos=args.videos,
                      num_days=args.days, impressions_per_user_day=args.impressions_per_user_day,
                      seed=args.seed, start_date=args.start_date)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
