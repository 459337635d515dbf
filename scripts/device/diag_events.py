"""Why did `roofline greenline` on the GPU sum kernel events to more than the step? (2026-11-29:
3.7x on R2B3.) Runs measure_greenline on a small grid with two probes and prints, per launch
position in a program call, the summed event times, and the events' relation to the queue primer.

    python3 scripts/device/diag_events.py [GRID LEVELS]
"""

from __future__ import annotations

import statistics
import sys


def main() -> None:
    import cupy as cp

    from icoforge.errors import IcoforgeError
    from icoforge.perf import greenline, timing

    grid, levels = (sys.argv[1], int(sys.argv[2])) if len(sys.argv) > 2 else ("R2B3", 10)
    spin_ends: list = []  # an event recorded right after each primer spin (current stream)
    raw: list[tuple[str, list[float]]] = []
    real_primer, real_launches = timing.queue_primer, greenline.gpu_launches

    def primer(cp_: object, seconds: float):
        spin = real_primer(cp_, seconds)

        def prime() -> None:
            spin()
            e = cp.cuda.Event()
            e.record()
            spin_ends.append((seconds, e))

        return prime

    def launches(call, cost, elapsed):
        raw.append((call.program, [s for _, s in elapsed], [(s, e) for _, s, e in call.launches]))
        return real_launches(call, cost, elapsed)

    timing.queue_primer, greenline.gpu_launches = primer, launches
    try:
        r = greenline.measure_greenline(grid, levels, "icoforge-cuda", steps=2, peak_gflops=1e4, status=print)
        print(f"step {r.step_seconds * 1e3:.2f} ms, kernel events {r.kernel_seconds * 1e3:.2f} ms per step")
    except IcoforgeError as e:  # measure_greenline refuses untrustworthy events; the raw data is kept
        print("measure_greenline refused:", e)
    print("current stream", cp.cuda.get_current_stream(), "null", cp.cuda.Stream.null)
    first = [v[0] for _, v, _ in raw if v]
    rest = [x for _, v, _ in raw for x in v[1:]]
    print(f"calls {len(raw)}: first launches sum {sum(first) * 1e3:.2f} ms (median {statistics.median(first) * 1e6:.1f} us); "
          f"other launches {len(rest)} sum {sum(rest) * 1e3:.2f} ms (median {statistics.median(rest) * 1e6:.1f} us)")
    n = min(len(spin_ends), len(raw))
    # the last len(raw) spins belong to the event-timed steps
    pairs = list(zip(spin_ends[-n:], raw[-n:]))
    gaps = [cp.cuda.get_elapsed_time(se, lau[0][0]) * 1e-3 for (_, se), (_, _, lau) in pairs if lau]
    spins = [s for (s, _), _ in pairs]
    print(f"spin end -> first start: median {statistics.median(gaps) * 1e6:.1f} us, min {min(gaps) * 1e6:.1f} us, "
          f"max {max(gaps) * 1e6:.1f} us (negative: the start event fired before the spin ended); spins median {statistics.median(spins) * 1e3:.2f} ms")
    for prog, v, _ in raw[:8]:
        print(prog[:40], " ".join(f"{x * 1e6:.0f}" for x in v[:8]))


if __name__ == "__main__":
    main()
