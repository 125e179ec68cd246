"""Run Part 1's memory checks (q1, q4, q5) against the reference solution on CUDA and print the figures.

    python3 assignments/hw07/tests/gpu_memory_check.py            # on a machine with a GPU (exit 0: all as expected)
    python3 assignments/hw07/tests/gpu_memory_check.py --allow-cpu   # dry run of the same script on the CPU tracker
    python3 assignments/hw07/tests/gpu_memory_check.py --all      # also every other variant of the q1/q4/q5 catalogue

On a CUDA machine the hidden checks measure with the allocator statistics
(`torch.cuda.memory_allocated` / `max_memory_allocated`) through the
autograder's memory probe, on models and inputs placed on the GPU; on the CPU
with the storage tracker. Same assertions, same margins. This script:

1. loads the solution functions from the master sources with
   part1_solution.py beside this file (shared with test_part1_memory.py; no otter);
2. runs every hidden check of q1, q4 and q5 on the solution (all must pass);
3. runs the memory checks on the variants that give the right numbers and
   differ only in memory (M4, M18, M23, M17, ...): the numeric checks must pass
   them and a memory check must fail them, with a message that names them;
4. prints the measured figures (reference against each variant) for the report.

It needs torch (with CUDA), numpy and matplotlib; nothing else from the repository's environment.
"""
from __future__ import annotations

import argparse
import sys
import time

import matplotlib  # noqa: E402
matplotlib.use("Agg")

from part1_solution import CHECKS, MEMORY_CHECKS, catalogue, defined_names, failed_checks, run_check  # noqa: E402
from part1_solution import solution_namespace as namespace  # noqa: E402
from hw07_checks import _probe, q1, q4, q5  # noqa: E402
import torch  # noqa: E402

MEMORY_ONLY = ["M4", "M4-kept-losses", "M18", "M18-list", "M23", "M23-plain", "M17", "M17-probe-per-step",
               "M46-identity-pack-leak"]


def figures(label: str, ns: dict, which=("evaluate", "accumulation", "checkpoint", "timeline", "leak")) -> None:
    """Print what the memory checks measure for this namespace's functions."""
    if "evaluate" in which:
        f = q1.measure_evaluate_memory(ns["evaluate"])
        print(f"  [{label}] evaluate: peak {f['yours']['peak']:,} B (reference {f['reference']['peak']:,}), live "
              f"after {f['yours']['live']:,} B; one batch saves {f['saved_one_batch']:,} B")
    if "accumulation" in which:
        f = q5.measure_accumulation_memory(ns["accumulate_gradients"])
        k1, k2 = f["ks"]
        print(f"  [{label}] accumulation: peak K={k1} {f['yours'][k1]:,} B, K={k2} {f['yours'][k2]:,} B, slope "
              f"{f['yours']['slope']:,.0f} B/microbatch (reference {f['reference'][k1]:,} / "
              f"{f['reference'][k2]:,}, slope {f['reference']['slope']:,.0f}); one microbatch saves "
              f"{f['saved_one_microbatch']:,} B")
    if "checkpoint" in which:
        f = q5.measure_checkpoint_memory(ns["checkpointed_forward"])
        print(f"  [{label}] checkpointing: live after forward {f['yours']:,} B (plain {f['plain']:,}, reference "
              f"checkpointing {f['reference']:,})")
    if "timeline" in which:
        f = q4.measure_memory_timeline(ns["memory_timeline"])
        mine = [b for _, b in f["yours"]] if isinstance(f["yours"], list) else f["yours"]
        ref = [b for _, b in f["reference"]]
        print(f"  [{label}] timeline: {mine}")
        print(f"  [{label}] reference timeline: {ref} (parameters {f['parameters']:,} B, activations "
              f"{f['activations']:,} B); across the first step: yours {mine[3] - mine[2]:+,} B, reference "
              f"{ref[3] - ref[2]:+,} B")
    if "leak" in which:
        f = q4.measure_saved_activation_leak(ns["saved_activation_bytes"])
        print(f"  [{label}] saved_activation_bytes: {f['live_after']:,} B alive afterwards (one forward saves "
              f"{f['saved']:,} B)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-cpu", action="store_true", help="run on the CPU tracker when there is no GPU")
    parser.add_argument("--all", action="store_true", help="also run every other variant of the catalogue")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() and not args.allow_cpu:
        print("CUDA is not available: run on a GPU machine, or pass --allow-cpu for a dry run on the CPU tracker.")
        return 2
    start = time.perf_counter()
    print(f"torch {torch.__version__}; probe backend {_probe.backend()} on {_probe.device()}"
          + (f" ({torch.cuda.get_device_name()})" if torch.cuda.is_available() else ""))
    problems = []

    sol = namespace()
    print("\n== every hidden check on the solution ==")
    for name, checks in CHECKS.items():
        for check in checks:
            t = time.perf_counter()
            message = run_check(check, sol[name])
            status = "pass" if message is None else f"FAIL: {message}"
            where = f"{check.__module__.rsplit('.', 1)[-1]}.{check.__name__}"
            print(f"  {where:43s} {time.perf_counter() - t:5.2f} s  {status}")
            if message is not None:
                problems.append(f"solution fails {check.__name__}: {message}")
    print("\n== figures, solution ==")
    figures("solution", sol)

    variants = catalogue()
    chosen = list(MEMORY_ONLY) + [v for v in variants if variants[v].correct and v not in MEMORY_ONLY]
    if args.all:
        chosen += [v for v in variants if v not in chosen]
    print("\n== variants ==")
    for vid in chosen:
        variant = variants[vid]
        failed = failed_checks(variant)
        text = " ".join(m for _, m in failed).lower()
        if variant.correct:
            ok = not failed
        else:
            ok = bool(failed) and all(f.lower() in text for f in variant.expect)
            if vid in MEMORY_ONLY:
                ok = ok and all(check in MEMORY_CHECKS for check, _ in failed)
        label = "correct" if variant.correct else "misconception"
        print(f"  {'ok ' if ok else 'BAD'} {variant.question} {vid:28s} ({label}) failed: "
              f"{[c.__name__ for c, _ in failed] or 'nothing'}")
        if failed and (not ok or vid in MEMORY_ONLY):
            for check, message in failed:
                print(f"       {check.__name__}: {message}")
        if not ok:
            problems.append(f"variant {vid} not graded as expected")
    print("\n== figures, memory-only misconceptions ==")
    for vid, which in (("M4", "evaluate"), ("M18", "accumulation"), ("M23", "checkpoint"), ("M17", "timeline"),
                       ("M46-identity-pack-leak", "leak")):
        figures(vid, namespace(variants[vid].source), which=(which,))

    print(f"\n{len(problems)} problem(s) in {time.perf_counter() - start:.1f} s")
    for p in problems:
        print("  -", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
