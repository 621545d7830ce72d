#!/usr/bin/env python3
"""Prose statistics of Markdown files: words outside code, and sentence lengths.

Usage: python3 scripts/prose-stats.py README.md [docs/*.md ...]

Rules (kept simple and stated, so the figures can be checked by hand):
- Fenced code blocks (``` ... ```) are dropped; everything else counts as prose words,
  headings and table cells included (so the word count errs high).
- Link targets are dropped (`[text](target)` counts as `text`); inline code counts as words.
- Words are whitespace-separated tokens with at least one letter or digit.
- Sentences: paragraphs and list items (headings and table rows left out) are joined per
  paragraph / item and split after '.', '!' or '?' followed by a space and then an upper-case
  letter, a backtick, a digit or a quote mark, or at the end; a sentence's length is its words.
"""
import re
import statistics
import sys

LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'0-9*(])")


def words(text):
    return [w for w in text.split() if re.search(r"[A-Za-z0-9]", w)]


def prose_units(path):
    """(all prose lines, sentence units) of one file."""
    lines, units, cur = [], [], []
    fence = False

    def flush():
        if cur:
            units.append(" ".join(cur))
            cur.clear()

    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if line.lstrip().startswith("```"):
            fence = not fence
            flush()
            continue
        if fence:
            continue
        text = LINK.sub(r"\1", line)
        lines.append(text)
        s = text.strip()
        if not s or s.startswith("#") or s.startswith("|"):
            flush()
            continue
        if re.match(r"([-*+]|\d+\.)\s", s):
            flush()
            s = re.sub(r"^([-*+]|\d+\.)\s+", "", s)
        cur.append(s)
    flush()
    return lines, units


def main(paths):
    total_words = 0
    lengths = []
    for p in paths:
        lines, units = prose_units(p)
        total_words += sum(len(words(line)) for line in lines)
        for u in units:
            for sent in SPLIT.split(u):
                n = len(words(sent))
                if n:
                    lengths.append(n)
    print(f"files: {len(paths)}")
    print(f"prose words (outside code blocks): {total_words}")
    print(f"sentences: {len(lengths)}")
    if lengths:
        print(f"median sentence length (words): {statistics.median(lengths)}")
        print(f"mean sentence length (words): {statistics.mean(lengths):.1f}")
        print(f"longest sentence (words): {max(lengths)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
