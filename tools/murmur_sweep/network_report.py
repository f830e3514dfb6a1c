"""The extra section of a sweep with `report: network` (experiments/network.yaml): the time to
the target (slowest peer, summary.json's time_to_accuracy) against bandwidth per algorithm, the
speedup of each algorithm over allreduce per network, the straggler's cost per algorithm, and
two sentences drawn from those figures on where gossip wins and where it does not. Reads the
rows that report.py made; appends to report.md and writes network_table.md (the table for
docs/experiments.md).
Axes it expects: world.size, bandwidth, latency, straggler, algorithm (allreduce among them).
"""
import os

from . import plots

BASE = "allreduce"


def gbit(label):
    from .tc_units import rate_gbit
    return rate_gbit(label)


def key(row):
    return (str(row.get("world.size", row.get("peers"))), row.get("bandwidth", ""), row.get("latency", ""),
            row.get("straggler", "none"))


def index(rows):
    """{(peers, bandwidth, latency, straggler): {algorithm: seconds to target or None}}."""
    out = {}
    for r in rows:
        out.setdefault(key(r), {})[r.get("algorithm")] = r.get("slowest_to_target_s")
    return out


def speedups(table, algorithms):
    """[(condition, {algorithm: allreduce's time / its time})] where allreduce reached the target."""
    out = []
    for cond, times in table.items():
        base = times.get(BASE)
        out.append((cond, {a: (base / times[a] if base and times.get(a) else None) for a in algorithms}))
    return out


def figure(out, table, algorithms):
    plt = plots.pyplot()
    panels = sorted({(c[0], c[2]) for c in table if c[3] == "none"})
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (n, lat) in zip(axes[0], panels):
        for a in algorithms:
            pts = sorted((gbit(c[1]), t[a]) for c, t in table.items()
                         if c[0] == n and c[2] == lat and c[3] == "none" and t.get(a) is not None and c[1])
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=a)
        ax.set_xscale("log")
        ax.set_xlabel("bandwidth per peer (Gbit/s)")
        ax.set_ylabel("time to target (s)")
        ax.set_title(f"{n} peers, latency {lat}")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    png = "network_time_to_target.png"
    fig.savefig(os.path.join(out, png), dpi=110)
    plt.close(fig)
    return png


def fmt_x(v):
    return "-" if v is None else f"{v:.2f}x"


def sentences(sp, table, algorithms):
    gossip = [a for a in algorithms if a != BASE]
    wins, losses, measured = [], [], 0
    for cond, s in sp:
        best = max(((s[a], a) for a in gossip if s.get(a)), default=None)
        if best is None or cond[3] != "none":
            continue
        measured += 1
        where = f"{cond[0]} peers at {cond[1]}, {cond[2]}"
        (wins if best[0] >= 2 else losses).append(f"{where} ({best[1]} {best[0]:.2f}x)")
    text = []
    if measured:
        text.append(f"Where gossip wins: the best decentralized algorithm reaches the target in at most half "
                    f"of allreduce's time in {len(wins)} of {measured} networks measured" +
                    (f": {'; '.join(wins)}." if wins else "."))
        text.append("Where it does not: " + ("; ".join(losses) if losses else "nowhere among those measured") +
                    " (speedup of the best decentralized algorithm over allreduce, below 2x).")
    strag = [(c, t) for c, t in table.items() if c[3] != "none"]
    for c, t in strag:
        free = table.get((c[0], c[1], c[2], "none"), {})
        parts = [f"{a} {t[a] / free[a]:.2f}x" for a in algorithms if t.get(a) and free.get(a)]
        if parts:
            text.append(f"With the straggler ({c[3]}, {c[0]} peers, {c[1]}, {c[2]}), time to target against the "
                        f"fault-free run: {', '.join(parts)}.")
    if not text:
        text.append("(No network has both allreduce and another algorithm at the target yet: no conclusion.)")
    return text


def write(out, sweep, rows):
    algorithms = [a for a in (sweep.grid.get("algorithm") or {}) if any(r.get("algorithm") == a for r in rows)]
    table = index(rows)
    sp = sorted(speedups(table, algorithms), key=lambda cs: (int(cs[0][0]), -gbit(cs[0][1] or "0bit"),
                                                              cs[0][2], cs[0][3]))
    head = ["peers", "bandwidth", "latency", "straggler"] + [f"{a} s" for a in algorithms] + \
           [f"{a} speedup" for a in algorithms if a != BASE]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cond, s in sp:
        t = table[cond]
        lines.append("| " + " | ".join(list(cond) + ["-" if t.get(a) is None else f"{t[a]:.0f}" for a in algorithms] +
                                       [fmt_x(s.get(a)) for a in algorithms if a != BASE]) + " |")
    with open(os.path.join(out, "network_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    png = figure(out, table, algorithms)
    target = f"{100 * sweep.target:.0f}%" if sweep.target else "the target"
    md = ["", f"## Time to {target} and speedup over allreduce", "",
          f"Seconds until every peer's test accuracy has reached {target} (summary.json's time_to_accuracy), "
          "and allreduce's time over each algorithm's (above 1x: faster than allreduce). '-': not reached "
          "within the run, or the point did not run.", ""] + lines + [""]
    if png:
        md += [f"![time to {target} against bandwidth]({png})", ""]
    md += ["## Where gossip wins", ""] + [" ".join(sentences(sp, table, algorithms)), ""]
    with open(os.path.join(out, "report.md"), "a") as f:
        f.write("\n".join(md))
