#!/usr/bin/env python3
"""The configuration reference, generated from configs/default.toml's own comments.

configs/default.toml is the one list of every key (it is embedded in the binary, and the config
schema test checks it against the C++ schema), so the documentation site renders it instead of
keeping a copy that could drift: docs/conf.py puts `markdown()` into docs/configuration.md
at build time.

    python3 scripts/config_reference.py [configs/default.toml]   # prints the Markdown
"""
import os
import re
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, "configs", "default.toml")


def _split_comment(line):
    """(code, comment) of one TOML line; a '#' inside a string is not a comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def parse(path=DEFAULT):
    """[(section, section_note, [(note, [(key, default_text, doc)])])] in file order.

    A key's doc is its trailing comment and the indented comment lines under it. A comment line
    that starts a line is a note on the keys after it: it opens a new group of keys."""
    sections, cur, last = [], None, None
    for raw in open(path, encoding="utf-8").read().split("\n"):
        code, comment = _split_comment(raw)
        if not code.strip():
            if comment and raw.startswith(" ") and last is not None:
                last[2].append(comment)        # continuation of the key above
            elif comment and cur is not None:
                groups = cur[2]
                if groups[-1][1]:              # keys already under the current note: a new group
                    groups.append([[], []])
                groups[-1][0].append(comment)
                last = None
            elif not comment:
                last = None
            continue
        m = re.match(r"^\[([A-Za-z_][A-Za-z0-9_]*)\]$", code.strip())
        if m:
            cur = (m.group(1), comment, [[[], []]])
            sections.append(cur)
            last = None
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+)$", code)
        if not m or cur is None:
            raise ValueError(f"{path}: cannot read line {raw!r}")
        last = [m.group(1), m.group(2).strip(), [comment] if comment else []]
        cur[2][-1][1].append(last)
    return [(name, snote, [(" ".join(note), [(k, v, " ".join(d)) for k, v, d in keys])
                           for note, keys in groups if keys])
            for name, snote, groups in sections]


def _text(text):
    """Comment text as Markdown: code spans kept, HTML and emphasis characters escaped."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = (parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                    .replace("*", "\\*"))
    return "`".join(parts).replace("|", "\\|")


def markdown(path=DEFAULT):
    sections = parse(path)
    keys = [(s, k) for s, _, gs in sections for _, ks in gs for k, *_ in ks]
    want = {(s, k) for s, t in tomllib.load(open(path, "rb")).items() for k in t}
    if set(keys) != want or len(keys) != len(want):  # the parser must see what TOML sees
        raise ValueError(f"{path}: reference parser disagrees with TOML: "
                         f"{sorted(set(keys) ^ want)}")
    undocumented = [f"{s}.{k}" for s, _, gs in sections for note, ks in gs
                    for k, _, d in ks if not d and not note]
    if undocumented:
        raise ValueError(f"{path}: keys without a comment: {', '.join(undocumented)}")
    out = [f"Generated from `configs/default.toml` ({len(keys)} keys in {len(sections)} sections)"
           " when this site is built. Set a key with `--set section.key=value` (strings quoted: "
           "`--set env.id='\"gym:Acrobot-v1\"'`) or in a file given with `--config`.", ""]
    for name, snote, groups in sections:
        out += [f"## [{name}]", ""]
        if snote:
            out += [_text(snote[0].upper() + snote[1:]) + ".", ""]
        for note, ks in groups:
            if note:
                out += [_text(note), ""]
            out += ["| key | default | meaning |", "|---|---|---|"]
            for key, default, doc in ks:
                value = default.replace("|", "\\|")
                out.append(f"| `{name}.{key}` | `{value}` | {_text(doc)} |")
            out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(markdown(sys.argv[1] if len(sys.argv) > 1 else DEFAULT))
