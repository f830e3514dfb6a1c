"""A sweep file, read and expanded into its points.

    name: topologies                 # default: the file's stem
    base: configs/ring.yaml          # or an inline `config:` mapping
    peers: 4                         # world.size of every point, unless a grid axis sets it
    runner: launch                   # launch (tools/murmur-launch, one process per peer) | sim
    target_accuracy: 0.80            # for "time and bytes to target"
    sets: {train.epochs: 3}          # overrides common to every point
    grid:                            # cartesian product over the axes, in this order
      world.size: [4, 8]             # an axis over one dotted config key
      topology:                      # an axis of named override sets ("variants")
        ring: {topology.graph: ring}
        allreduce: {algorithm.name: allreduce}
    exclude: [{world.size: 4, topology: allreduce}]   # drop the grid points matching all keys
    points:                          # extra points beside the grid (or alone, without one)
      - {name: n9_torus, label: torus, world.size: 9, topology.graph: torus}
    series: topology                 # the axis drawn as lines in the plots (default: the last)
    report: network                  # an extra report section (network: time to target against
                                     # bandwidth, speedups over allreduce; network_report.py)

A point is (id, label of each axis, overrides). Ids are readable slugs, unique in the sweep.
Pure functions of the file: no processes, no output.
"""
import itertools
import json
import os
import re

import yaml

# Short names of common axes in point ids: n8_alpha0.1_ring rather than world.size8_...
SHORT = {"world.size": "n", "data.dirichlet_alpha": "alpha", "algorithm.local_steps": "H",
         "run.seed": "seed", "algorithm.compressor.ratio": "ratio", "train.epochs": "ep"}


class SweepError(Exception):
    pass


class Point:
    def __init__(self, pid, axes, overrides):
        self.id = pid            # slug, the run directory's name
        self.axes = axes         # {axis name: label}, in the sweep's axis order
        self.overrides = overrides  # {dotted key: value}, sets first, then the point's own

    def world_size(self, default):
        return int(self.overrides.get("world.size", default))


class Sweep:
    def __init__(self, path, data):
        self.path = os.path.abspath(path)
        self.name = data.get("name") or os.path.splitext(os.path.basename(path))[0]
        self.root = find_root(self.path)
        self.base = None
        if "base" in data:
            base = data["base"]
            self.base = base if os.path.isabs(base) else os.path.join(self.root, base)
        self.inline = data.get("config")
        if self.base is None and self.inline is None:
            raise SweepError(f"{path}: needs `base:` (a config file) or an inline `config:`")
        self.runner = data.get("runner", "launch")
        if self.runner not in ("launch", "sim"):
            raise SweepError(f"{path}: runner: {self.runner!r} is not launch or sim")
        self.peers = int(data.get("peers", 0)) or None
        self.target = data.get("target_accuracy")
        self.sets = flatten(data.get("sets") or {})
        self.grid = data.get("grid") or {}
        self.axes = list(self.grid.keys())
        self.series = data.get("series") or (self.axes[-1] if self.axes else "point")
        self.report = data.get("report")
        if self.report not in (None, "network"):
            raise SweepError(f"{path}: report: {self.report!r} is not network")
        self.points = expand(path, self, data)
        if not self.points:
            raise SweepError(f"{path}: no points (empty grid and no `points:`)")


def find_root(path):
    """The repository root: the nearest directory above `path` holding tools/murmur-launch."""
    d = os.path.dirname(path)
    while d != os.path.dirname(d):
        if os.path.exists(os.path.join(d, "tools", "murmur-launch")):
            return d
        d = os.path.dirname(d)
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/murmur_sweep/..


def flatten(mapping, prefix=""):
    """{a: {b: 1}} -> {"a.b": 1}; dotted keys are kept as they are."""
    out = {}
    for k, v in mapping.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def slug(text):
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", str(text)).strip("-") or "x"


def axis_values(path, axis, values):
    """[(label, overrides)] of one grid axis: a list over a key, or a mapping of variants."""
    if isinstance(values, dict):
        return [(str(label), flatten(ov or {})) for label, ov in values.items()]
    if isinstance(values, list) and values:
        return [(fmt_value(v), {axis: v}) for v in values]
    raise SweepError(f"{path}: grid.{axis}: expected a non-empty list or a mapping of variants")


def fmt_value(v):
    return json.dumps(v) if isinstance(v, (list, dict, bool)) else str(v)


def matches(axes, rule):
    return all(axes.get(k) == fmt_value(v) or axes.get(k) == v for k, v in rule.items())


def expand(path, sweep, data):
    points, seen = [], set()

    def add(pid, axes, overrides):
        if pid in seen:
            raise SweepError(f"{path}: two points have the id {pid!r}; give one a `name:`")
        seen.add(pid)
        points.append(Point(pid, axes, overrides))

    choices = [axis_values(path, a, sweep.grid[a]) for a in sweep.axes]
    for combo in itertools.product(*choices) if choices else []:
        axes = {a: label for a, (label, _) in zip(sweep.axes, combo)}
        if any(matches(axes, rule) for rule in data.get("exclude") or []):
            continue
        overrides = dict(sweep.sets)
        parts = []
        for a, (label, ov) in zip(sweep.axes, combo):
            overrides.update(ov)
            parts.append(f"{SHORT.get(a, a.split('.')[-1])}{label}" if a in ov else label)
        add("_".join(slug(p) for p in parts), axes, overrides)
    for i, extra in enumerate(data.get("points") or []):
        extra = dict(extra)
        name = extra.pop("name", None)
        label = extra.pop("label", None)
        ov = flatten(extra)
        pid = slug(name or "_".join(f"{k.split('.')[-1]}{fmt_value(v)}" for k, v in ov.items()) or f"p{i}")
        axes = {}
        for a in sweep.axes:
            axes[a] = fmt_value(ov[a]) if a in ov else (label or pid if a == sweep.series else "")
        if sweep.series not in axes:
            axes[sweep.series] = label or pid
        add(pid, axes, {**sweep.sets, **ov})
    if not sweep.axes and sweep.series == "point":
        for p in points:
            p.axes.setdefault("point", p.id)
    return points


def load(path):
    """Reads and expands a sweep file. Throws SweepError naming the file and the problem."""
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise SweepError(f"{path}: {e.strerror}")
    except yaml.YAMLError as e:
        raise SweepError(f"{path}: not YAML: {e}")
    if not isinstance(data, dict):
        raise SweepError(f"{path}: expected a mapping at the top")
    known = {"name", "base", "config", "peers", "runner", "target_accuracy", "sets", "grid",
             "exclude", "points", "series", "description", "report"}
    unknown = set(data) - known
    if unknown:
        raise SweepError(f"{path}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    return Sweep(path, data)
