#!/usr/bin/env python3
"""The man pages in docs/man/ cannot drift from the programs or the shipped configuration:
- each renders without a warning, both through groff (-ww: every warning) and through man --warnings;
- rdmagate(8) and rdmagate-bench(1) name every flag their program's --help prints, and every flag their
  OPTIONS section describes is one that --help prints (so a removed flag leaves the page too);
- rdmagate.yaml(5) describes every key of conf/rdmagate.yaml under KEYS, and nothing else there.

usage: man_pages_test.py SOURCE_DIR RDMAGATE RDMAGATE_BENCH
"""
import re
import shutil
import subprocess
import sys

import yaml

FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][A-Za-z0-9_-]*|-[a-zA-Z])(?![\w-])")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def plain(roff):
    """The page's source with the escapes that hide a flag's spelling removed."""
    text = roff.replace("\\-", "-").replace("\\%", "").replace("\\&", "")
    return re.sub(r"\\f(\[[A-Z]*\]|[A-Z])", "", text)


def render_check(page):
    groff = subprocess.run(["groff", "-man", "-ww", "-z", page], capture_output=True, text=True)
    if groff.returncode != 0 or groff.stderr.strip():
        fail(f"{page}: groff -man -ww warns: {groff.stderr.strip()} (exit {groff.returncode})")
    if shutil.which("man") is None:
        fail("man is not installed (man-db): cannot run man --warnings")
        return
    man = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True,
                         env={"MANWIDTH": "80", "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    if man.returncode != 0 or man.stderr.strip():
        fail(f"{page}: man --warnings warns: {man.stderr.strip()} (exit {man.returncode})")


def options_section(text):
    m = re.search(r"^\.SH OPTIONS\n(.*?)(?=^\.SH )", text, re.S | re.M)
    return m.group(1) if m else ""


def flags_check(page, program):
    run = subprocess.run([program, "--help"], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{program} --help exited {run.returncode}: {run.stderr.strip()}")
        return
    help_flags = set(FLAG.findall(run.stdout))
    if len(help_flags) < 3:
        fail(f"{program} --help: found only {sorted(help_flags)}; is the flag pattern still right?")
    text = plain(open(page).read())
    page_flags = set(FLAG.findall(text))
    for flag in sorted(help_flags - page_flags):
        fail(f"{page}: --help of {program} lists {flag}, the page does not")
    # Flags the OPTIONS section describes (its .TP headers) must still exist.
    headers = re.findall(r"^\.TP\n(.*)$", options_section(text), re.M)
    described = set()
    for h in headers:
        described |= set(FLAG.findall(h))
    if not described:
        fail(f"{page}: no flag found in the OPTIONS section")
    for flag in sorted(described - help_flags):
        fail(f"{page}: describes {flag}, which --help of {program} does not list")
    print(f"{page}: {len(help_flags)} flags of --help, all in the page; {len(described)} described")


def leaf_keys(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaf_keys(v, path + (k,))
    else:
        yield ".".join(path)


def keys_check(page, conf_file):
    keys = set(leaf_keys(yaml.safe_load(open(conf_file))))
    text = plain(open(page).read())
    m = re.search(r"^\.SH KEYS\n(.*?)(?=^\.SH )", text, re.S | re.M)
    if not m:
        fail(f"{page}: no KEYS section")
        return
    described = set(re.findall(r"^\.TP\n\.B ([a-z_.]+)$", m.group(1), re.M))
    for k in sorted(keys - described):
        fail(f"{page}: key {k} of {conf_file} is not described under KEYS")
    for k in sorted(described - keys):
        fail(f"{page}: KEYS describes {k}, which {conf_file} does not have")
    print(f"{page}: {len(keys)} keys of {conf_file}, each described once under KEYS")


def main():
    src, rdmagate, bench = sys.argv[1:4]
    pages = {n: f"{src}/docs/man/{n}" for n in ("rdmagate.8", "rdmagate.yaml.5", "rdmagate-bench.1")}
    for page in pages.values():
        render_check(page)
    flags_check(pages["rdmagate.8"], rdmagate)
    flags_check(pages["rdmagate-bench.1"], bench)
    keys_check(pages["rdmagate.yaml.5"], f"{src}/conf/rdmagate.yaml")
    if failures:
        print(f"man pages: {len(failures)} problem(s)")
        return 1
    print("man pages: all render cleanly and match --help and conf/rdmagate.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
