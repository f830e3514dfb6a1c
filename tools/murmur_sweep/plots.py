"""The figures of a sweep report, one PNG each (matplotlib, Agg backend): test accuracy against
epochs and against bytes sent, consensus distance against step, final figures against the
number of peers (with the spectral-gap prediction), and each gossip topology's graph (drawn by
murmur-topo --dot). Lines are the sweep's `series` axis; the other axes make the panels.
"""
import json
import math
import os
import shutil
import subprocess

SHORT = {"world.size": "n", "data.dirichlet_alpha": "alpha", "algorithm.local_steps": "H"}


class Topo:
    """murmur-topo, asked once per (graph, peers, weights)."""

    def __init__(self, binary):
        self.binary = binary if binary and os.path.exists(binary) else None
        self.cache = {}
        self.registry = None

    def uses_graph(self, algorithm):
        """True iff `algorithm` averages over the topology's graph (murmur-topo --list: the
        registry of optimizers/algorithm.h, not a list kept here)."""
        if self.registry is None:
            self.registry = {}
            if self.binary:
                r = subprocess.run([self.binary, "--list", "--json"], capture_output=True, text=True)
                if r.returncode == 0:
                    self.registry = {a["name"]: a for a in json.loads(r.stdout)["algorithms"]}
        return self.registry.get(algorithm, {}).get("uses_graph", False)

    def spectral_gap(self, graph, n, weights):
        key = (graph, n, weights)
        if key not in self.cache:
            self.cache[key] = None
            if self.binary:
                r = subprocess.run([self.binary, "--graph", graph, "--peers", str(n), "--weights", weights,
                                    "--json"], capture_output=True, text=True)
                if r.returncode == 0:
                    # 1 - |lambda_2|^(1/rounds): one round's share of the period's product, so
                    # time-varying graphs compare with static ones (rounds = 1: the usual gap).
                    self.cache[key] = 1.0 - json.loads(r.stdout)["per_round"]
        return self.cache[key]

    def draw(self, graph, n, weights, png):
        if not self.binary or not shutil.which("dot"):
            return False
        dot = os.path.splitext(png)[0] + ".dot"
        r = subprocess.run([self.binary, "--graph", graph, "--peers", str(n), "--weights", weights,
                            "--dot", dot], capture_output=True, text=True)
        if os.path.exists(dot):
            os.remove(dot)  # the PNG is what the report shows
        return r.returncode == 0 and os.path.exists(png)


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def panels(sweep, data):
    """{panel title: [(series label, point data)]} in the sweep's point order."""
    out = {}
    for pid, (point, row, cv, cons) in data.items():
        others = [(a, v) for a, v in point.axes.items() if a not in (sweep.series, "point") and v != ""]
        title = ", ".join(f"{SHORT.get(a, a.split('.')[-1])}={v}" for a, v in others) or sweep.name
        label = point.axes.get(sweep.series) or pid
        if "." in sweep.series and sweep.series in sweep.grid:  # a bare number needs its key
            label = f"{SHORT.get(sweep.series, sweep.series.split('.')[-1])}={label}"
        out.setdefault(title, []).append((label, (point, row, cv, cons)))
    return out


def grid_figure(plt, count):
    cols = min(count, 3)
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.5 * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def line_figure(plt, sweep, data, path, x_of, y_of, xlabel, ylabel, logy=False, band=None,
                points_of=lambda d: d[2]):
    """One panel per group of points, one line per series; x_of/y_of read an item of
    points_of(point data): the evaluation curve by default."""
    groups = panels(sweep, data)
    fig, axes = grid_figure(plt, len(groups))
    drawn = False
    for ax, (title, lines) in zip(axes, groups.items()):
        xs_all = []
        for label, d in lines:
            pts = [(x_of(d, c), y_of(d, c), c) for c in points_of(d)]
            pts = [p for p in pts if p[0] is not None and p[1] is not None and (not logy or p[1] > 0)]
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            line, = ax.plot(xs, ys, marker="o", markersize=3, label=label)
            if band:
                lo, hi = zip(*(band(p[2]) for p in pts))
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
            xs_all += [x for x in xs if x > 0]
            drawn = True
        if logy:
            ax.set_yscale("log")
        if xs_all and max(xs_all) / max(min(xs_all), 1e-12) > 50 and xlabel.startswith("bytes"):
            ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if ax.get_lines():
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def predicted(gap, steps):
    """Consensus distance of one gossip mode lambda = 1 - gap kicked by unit noise every step,
    after `steps` steps: sqrt(sum_{t<T} lambda^(2t)) = sqrt((1 - lambda^2T) / (1 - lambda^2)).
    Long runs give the steady state 1/sqrt(gap (2 - gap)) ~ lr sigma / sqrt(p) (Koloskova et al.
    2020, IID data); short runs on slow graphs are still filling up, ~ sqrt(T)."""
    lam = 1.0 - gap
    if lam <= 0:
        return 1.0
    return math.sqrt((1.0 - lam ** (2 * steps)) / (1.0 - lam * lam))


def scale_figure(plt, sweep, data, path):
    """Final consensus distance (gossip only) and accuracy against n, one line per series, with
    the spectral-gap prediction scaled by one constant c fitted over all points (the geometric
    mean of measured / predicted): the prediction's shape across n and graphs is the claim."""
    by_series = {}
    for pid, (point, row, cv, cons) in data.items():
        by_series.setdefault(point.axes.get(sweep.series, pid), []).append(row)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    ok = lambda r: r.get("consensus_distance") and r.get("spectral_gap") and r.get("steps")
    pairs = [(r["consensus_distance"], predicted(r["spectral_gap"], r["steps"]))
             for rs in by_series.values() for r in rs if ok(r)]
    c = math.exp(sum(math.log(d / p) for d, p in pairs) / len(pairs)) if pairs else None
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, rs) in enumerate(by_series.items()):
        color = colors[i % len(colors)]
        rs = sorted((r for r in rs if r.get("peers")), key=lambda r: r["peers"])
        ns = [r["peers"] for r in rs]
        if c is not None and any(ok(r) for r in rs):
            ax1.plot(ns, [r["consensus_distance"] if ok(r) else float("nan") for r in rs], marker="o",
                     color=color, label=label)
            ax1.plot(ns, [c * predicted(r["spectral_gap"], r["steps"]) if ok(r) else float("nan") for r in rs],
                     linestyle="--", color=color, alpha=0.7)
        ax2.plot(ns, [r.get("avg_model_acc") or float("nan") for r in rs], marker="o", color=color, label=label)
        ax2.plot(ns, [r.get("peer_acc_mean") or float("nan") for r in rs], linestyle=":", color=color)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("peers n")
        ax.legend(fontsize=7)
    ax1.set_yscale("log")
    ax1.set_ylabel("final consensus distance (gossip)")
    ax1.set_title("measured (solid) vs spectral-gap prediction (dashed)", fontsize=9)
    ax2.set_ylabel("final test accuracy")
    ax2.set_title("average model (solid), mean over peers (dotted)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_all(out, sweep, data, topo):
    """Draws every figure the data allows; returns [(title, png file name)]."""
    if not data:
        return []
    plt = pyplot()
    figures = []
    acc = lambda d, c: c["acc_mean"]
    band = lambda c: (c["acc_min"], c["acc_max"])
    if line_figure(plt, sweep, data, os.path.join(out, "accuracy_vs_epoch.png"), lambda d, c: c["epoch"], acc,
                   "epoch", "test accuracy (mean over peers; band: min-max)", band=band):
        figures.append(("Test accuracy against epochs", "accuracy_vs_epoch.png"))
    top = max((c["bytes"] for _, _, cv, _ in data.values() for c in cv), default=0)
    unit, div = next(((u, d) for u, d in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if top >= 2 * d), ("B", 1))
    if line_figure(plt, sweep, data, os.path.join(out, "accuracy_vs_bytes.png"), lambda d, c: c["bytes"] / div,
                   acc, f"bytes sent per peer ({unit})", "test accuracy (mean over peers)", band=band):
        figures.append(("Test accuracy against bytes sent", "accuracy_vs_bytes.png"))
    if line_figure(plt, sweep, data, os.path.join(out, "consensus_vs_step.png"), lambda d, c: c[0], lambda d, c: c[1],
                   "step", "consensus distance", logy=True, points_of=lambda d: d[3]):
        figures.append(("Consensus distance against step", "consensus_vs_step.png"))
    if len(sweep.grid.get("world.size") or []) >= 3:
        scale_figure(plt, sweep, data, os.path.join(out, "scale.png"))
        figures.append(("Final consensus distance and accuracy against the number of peers", "scale.png"))
    drawn = set()
    for point, row, cv, cons in data.values():
        cfg = json.load(open(os.path.join(out, point.id, "summary.json"))).get("config", {})
        if topo is None or not topo.uses_graph(cfg.get("algorithm", {}).get("name")):
            continue
        graph, weights, n = cfg["topology"]["graph"], cfg["topology"].get("weights", "uniform"), row["peers"]
        if (graph, n) in drawn or n > 32:  # a drawing of 64+ nodes says nothing
            continue
        drawn.add((graph, n))
        png = f"graph_{graph}_n{n}.png"
        if topo.draw(graph, n, weights, os.path.join(out, png)):
            figures.append((f"graph: {graph}, {n} peers", png))
    return figures
