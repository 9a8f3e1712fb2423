#!/usr/bin/env python3
"""Includes point one way inside a folder (a "room"): the files of a concept (x.h and x.cpp, one
node) include other concepts of the same room without a cycle, so the room has floors, and a file
never includes one that (directly or not) includes it back.

    check_room_includes.py REPO ROOM [ROOM ...]    # e.g. learner buffer comm

Prints each room's floors (longest include chain from the bottom), exits 1 naming a cycle."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(repo, room):
    nodes = {}
    base = os.path.join(repo, room)
    for d, _, files in os.walk(base):
        for f in files:
            if not f.endswith((".h", ".cpp", ".cu", ".cuh")):
                continue
            rel = os.path.relpath(os.path.join(d, f), repo)
            node = os.path.splitext(rel)[0]
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                deps = {os.path.splitext(i)[0] for i in INCLUDE.findall(fh.read()) if i.startswith(room + "/")}
            nodes.setdefault(node, set()).update(deps - {node})
    return nodes


def find_cycle(nodes):
    colour, stack = {}, []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in sorted(nodes.get(n, ())):
            if colour.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if colour.get(m) is None:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(nodes):
        if colour.get(n) is None:
            c = visit(n)
            if c:
                return c
    return None


def floors(nodes):
    memo = {}

    def floor(n):
        if n not in memo:
            memo[n] = 1 + max((floor(m) for m in nodes.get(n, ()) if m in nodes), default=0)
        return memo[n]

    return max((floor(n) for n in nodes), default=0)


def main():
    repo, rooms = sys.argv[1], sys.argv[2:]
    bad = False
    for room in rooms:
        nodes = graph(repo, room)
        if not nodes:
            print(f"FAIL: {room}/ has no sources")
            bad = True
            continue
        cycle = find_cycle(nodes)
        if cycle:
            print(f"FAIL: {room}/ includes run back up: " + " -> ".join(cycle))
            bad = True
        else:
            print(f"ok: {room}/: {len(nodes)} concepts on {floors(nodes)} floors, no include back up")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
