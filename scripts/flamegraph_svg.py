#!/usr/bin/env python3
"""Folded stacks (``frame;frame;frame COUNT`` per line, as `schedwatch profile` and stackcollapse tools write them)
on stdin -> a flame graph as SVG on stdout: each frame a box as wide as its share of the samples, its callers (here:
the workload, process and library that group it) below it. Standard library only; no script in the picture.

    schedwatch profile --cgroup /pool --duration 10 | scripts/flamegraph_svg.py --title "numpy pool" > pool.svg
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from html import escape

WIDTH = 1200
ROW = 18
FONT = 12
CHAR = 7.0  # average width of a character at FONT px
MARGIN = 10


class Node:
    """One frame of the merged stacks."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.children: dict[str, Node] = {}


def merge(lines: list[str]) -> Node:
    """The tree of all stacks, counts added along each path."""
    root = Node("all")
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        samples = int(float(count))
        root.count += samples
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, Node(frame))
            node.count += samples
    return root


def depth(node: Node) -> int:
    return 1 + max((depth(child) for child in node.children.values()), default=0)


def color(name: str) -> str:
    """A warm colour, stable per name."""
    digest = hashlib.md5(name.encode()).digest()
    return f"rgb({205 + digest[0] % 50},{80 + digest[1] % 130},{40 + digest[2] % 40})"


def boxes(node: Node, x: float, level: int, scale: float, height: int, out: list[str]) -> None:
    width = node.count * scale
    if width < 0.5:
        return
    y = height - MARGIN - (level + 1) * ROW
    label = node.name if width > 3 * CHAR else ""
    fitting = int((width - 6) // CHAR)
    if len(label) > fitting:
        label = label[: max(fitting - 2, 0)] + ".." if fitting > 3 else ""
    title = f"{node.name} ({node.count:,} samples)"
    out.append(
        f'<g><title>{escape(title)}</title><rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{ROW - 1}" '
        f'fill="{color(node.name)}" rx="2"/><text x="{x + 3:.1f}" y="{y + ROW - 5}">{escape(label)}</text></g>'
    )
    offset = x
    for child in sorted(node.children.values(), key=lambda child: child.name):
        boxes(child, offset, level + 1, scale, height, out)
        offset += child.count * scale


def render(root: Node, title: str) -> str:
    levels = depth(root)
    height = levels * ROW + 2 * MARGIN + 30
    scale = (WIDTH - 2 * MARGIN) / max(root.count, 1)
    parts: list[str] = []
    boxes(root, MARGIN, 0, scale, height, parts)
    heading = f"{title} ({root.count:,} samples)" if title else f"{root.count:,} samples"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="DejaVu Sans Mono, monospace" font-size="{FONT}">'
        f'<rect width="100%" height="100%" fill="#fdfdf6"/>'
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="16">{escape(heading)}</text>'
        + "".join(parts)
        + "</svg>\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--title", default="", help="the heading above the graph")
    args = parser.parse_args()
    root = merge(sys.stdin.readlines())
    if root.count == 0:
        print("flamegraph_svg: no samples on stdin (folded lines 'frame;frame COUNT')", file=sys.stderr)
        return 2
    sys.stdout.write(render(root, args.title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
