"""Small helpers the suites' ``tables`` use to read a result and write its cells."""

from typing import Any, Dict, Iterator, List, Optional, Tuple

__all__ = ["points", "point", "figure", "ratio", "fmt", "fmt_ratio", "fmt_range", "params_text"]


def points(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    return result.get("points", [])


def point(result: Dict[str, Any], **params) -> Optional[Dict[str, Any]]:
    """The point of ``result`` whose params include ``params`` (the first), or None."""
    for p in points(result):
        if all(p["params"].get(k) == v for k, v in params.items()):
            return p
    return None


def figure(p: Optional[Dict[str, Any]], contender: str, metric: str,
           part: str = "median") -> Optional[Any]:
    """A contender's summarised ``metric`` at point ``p`` (``part``: median or spread)."""
    if p is None:
        return None
    summary = p["contenders"].get(contender, {}).get("summary", {})
    return summary.get(metric, {}).get(part)


def ratio(p: Optional[Dict[str, Any]], name: str) -> Optional[Dict[str, Any]]:
    if p is None:
        return None
    return next((r for r in p["ratios"] if r["name"] == name), None)


def all_ratios(result: Dict[str, Any]) -> Iterator[Tuple[Dict[str, Any], Dict[str, Any]]]:
    for p in points(result):
        for r in p["ratios"]:
            yield p, r


def fmt(value: Optional[float], digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100 and digits > 0:
        digits = 0
    return f"{value:,.{digits}f}{unit}"


def fmt_range(spread: Optional[List[float]], digits: int = 2) -> str:
    if not spread:
        return ""
    low, high = spread
    return f"{low:.{digits}f}-{high:.{digits}f}"


def fmt_ratio(r: Optional[Dict[str, Any]], digits: int = 2) -> str:
    """``2.90x (2.71-3.05, 3 rounds)``: the median of the paired ratios, their spread."""
    if not r or r.get("median") is None:
        return "n/a"
    text = f"{r['median']:.{digits}f}x"
    rounds = len(r.get("per_round") or [])
    if rounds > 1:
        text += f" ({fmt_range(r['spread'], digits)}, {rounds} rounds)"
    return text


def fmt_goal(r: Optional[Dict[str, Any]]) -> str:
    if not r or r.get("goal") is None:
        return ""
    return f"{r['goal']:g}x"


def params_text(params: Dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in params.items())
