"""tc's rate spellings ("100mbit", "10gbit") as numbers, for sorting and plotting (the sweep package
must not depend on tools/murmur_netem, which only murmur-launch needs)."""
import re

UNITS = {"bit": 1e-9, "kbit": 1e-6, "mbit": 1e-3, "gbit": 1.0, "tbit": 1e3}


def rate_gbit(label):
    """'100mbit' -> 0.1; anything else (an unshaped point's label) -> 0."""
    m = re.fullmatch(r"(\d+(?:\.\d*)?)([a-z]+)", str(label).strip().lower())
    return float(m.group(1)) * UNITS[m.group(2)] if m and m.group(2) in UNITS else 0.0
