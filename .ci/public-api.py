#!/usr/bin/env python3
"""Lists the public API of the `turtlekv` crate from its rustdoc HTML.

Usage: public-api.py DOC_DIR [--check LISTING | --write LISTING]

One line per item declaration, method, trait implementation and variant,
in the words rustdoc prints them; of a trait implementation only its
header line. CI compares it with the committed
listing (crates/turtlekv/public-api.txt), so that the public surface only
changes on purpose: regenerate the listing with --write and commit it with
the change. Auto-trait and blanket implementations are left out (they
follow from the types), and so is `Bytes`, a re-export of the `bytes`
crate whose API is that crate's.
"""
import html.parser
import pathlib
import re
import sys

SKIPPED_FILES = {"struct.Bytes.html"}
STOP_AT = {"synthetic-implementations", "blanket-implementations"}


class Items(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.lines = []
        self.depth = 0  # open elements inside the one being captured
        self.text = None
        self.stopped = False
        self.in_trait_impls = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id") in STOP_AT:
            self.stopped = True
        if attrs.get("id") == "trait-implementations":
            self.in_trait_impls = True
        if self.stopped:
            return
        if self.text is not None:
            self.depth += 1
            return
        classes = (attrs.get("class") or "").split()
        if "code-header" in classes or "item-decl" in classes:
            self.text = []
            self.depth = 1

    def handle_endtag(self, tag):
        if self.text is None:
            return
        self.depth -= 1
        if self.depth == 0:
            line = re.sub(r"\s+", " ", "".join(self.text)).strip()
            # Of a trait implementation, only its header: the trait's
            # methods are the trait's, and std's change with the toolchain.
            is_impl = line.startswith(("impl", "unsafe impl"))
            if line and (is_impl or not self.in_trait_impls):
                self.lines.append(line)
            self.text = None

    def handle_data(self, data):
        if self.text is not None:
            self.text.append(data)


def listing(doc_dir):
    out = []
    # The pages all.html links to: a doc directory may keep pages of
    # items that no longer exist.
    linked = set(re.findall(r'href="([a-z]+\.[A-Za-z0-9_]+\.html)"', (pathlib.Path(doc_dir) / "all.html").read_text()))
    for page in sorted(pathlib.Path(doc_dir).glob("*.*.html")):
        if page.name in SKIPPED_FILES or page.name not in linked:
            continue
        parser = Items()
        parser.feed(page.read_text())
        kind, name = page.name.split(".")[:2]
        out.extend(f"{kind} {name}: {line}" for line in parser.lines)
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("--check", "--write"):
        sys.exit(__doc__)
    doc_dir, mode, path = sys.argv[1:]
    current = listing(doc_dir)
    if mode == "--write":
        pathlib.Path(path).write_text(current)
        return
    committed = pathlib.Path(path).read_text()
    if committed != current:
        import difflib
        diff = difflib.unified_diff(
            committed.splitlines(), current.splitlines(), path, "rustdoc", lineterm=""
        )
        print("\n".join(diff))
        sys.exit(
            f"the public API differs from {path}: if the change is meant, run "
            f".ci/public-api.py {doc_dir} --write {path} and commit it"
        )


main()
